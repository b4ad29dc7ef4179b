"""Base root filesystems (debootstrap, cached) and per-host copies."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .proc import TestbedError, Timer, run

log = logging.getLogger("testbed")

RELEASES = ("bookworm", "trixie", "forky")
DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"

#: Packages added to debootstrap's minbase. Enough for a systemd host that
#: Ansible manages over SSH (python3-apt for the apt module).
BASE_PACKAGES: tuple[str, ...] = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "libpam-systemd",
    "openssh-server",
    "python3",
    "python3-apt",
    "iproute2",
    "iputils-ping",
    "procps",
    "netbase",
    "ca-certificates",
    "less",
)

COPY_MODES = ("copy", "overlay")


def base_key(release: str, packages: tuple[str, ...] | list[str]) -> str:
    """Cache key of a base rootfs: release + the sorted package list."""
    pkgs = sorted(set(packages))
    digest = hashlib.sha256((release + "\n" + "\n".join(pkgs)).encode()).hexdigest()[:12]
    return f"{release}-{digest}"


@dataclass(frozen=True)
class BaseRootfs:
    path: Path  # the root filesystem directory
    key: str
    release: str
    build_seconds: float | None  # None when it came from the cache


def build_base(
    cache_dir: Path,
    release: str = "bookworm",
    packages: tuple[str, ...] | list[str] = BASE_PACKAGES,
    debian_mirror: str = DEFAULT_DEBIAN_MIRROR,
    rebuild: bool = False,
) -> BaseRootfs:
    """Return the cached base rootfs for ``release``, building it first if needed.

    The build goes to a temporary directory renamed into place only when
    debootstrap succeeded, so a crash never leaves a half-built cache entry.
    """
    if release not in RELEASES:
        raise TestbedError(f"unsupported release {release!r}; choose one of {RELEASES}")
    if shutil.which("debootstrap") is None:
        raise TestbedError("debootstrap is not installed (apt-get install debootstrap)")
    key = base_key(release, packages)
    (cache_dir / "base").mkdir(parents=True, exist_ok=True)
    # concurrent builders (two test runs) wait for each other instead of
    # both running debootstrap
    with open(cache_dir / "base" / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_base_locked(cache_dir, key, release, packages, debian_mirror, rebuild)


def _build_base_locked(cache_dir: Path, key: str, release: str,
                       packages: tuple[str, ...] | list[str], debian_mirror: str,
                       rebuild: bool) -> BaseRootfs:
    entry = cache_dir / "base" / key
    rootfs = entry / "rootfs"
    meta_file = entry / "meta.json"
    if rebuild and entry.exists():
        safe_rmtree(entry)
    if meta_file.exists() and rootfs.is_dir():
        return BaseRootfs(rootfs, key, release, None)
    tmp = cache_dir / "base" / f".{key}.tmp-{os.getpid()}"
    for stale in (cache_dir / "base").glob(f".{key}.tmp-*"):
        pid = stale.name.rsplit("-", 1)[-1]
        if not (pid.isdigit() and Path(f"/proc/{pid}").exists()):
            safe_rmtree(stale)  # left by a crashed build
    (tmp / "rootfs").mkdir(parents=True)
    argv = [
        "debootstrap",
        "--variant=minbase",
        "--include=" + ",".join(sorted(set(packages))),
        release,
        str(tmp / "rootfs"),
        debian_mirror,
    ]
    log.info("debootstrap %s into %s (takes minutes)", release, tmp)
    try:
        with Timer() as t:
            run(argv, timeout=1800)
        _finish_base(tmp / "rootfs")
    except BaseException:
        safe_rmtree(tmp)
        raise
    meta = {
        "release": release,
        "packages": sorted(set(packages)),
        "debian_mirror": debian_mirror,
        "debootstrap_seconds": round(t.seconds, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "size_bytes": _du(tmp / "rootfs"),
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    if entry.exists():  # another builder won the race
        safe_rmtree(tmp)
    else:
        tmp.rename(entry)
    log.info("base rootfs %s built in %.1fs", key, t.seconds)
    return BaseRootfs(rootfs, key, release, t.seconds)


def _finish_base(root: Path) -> None:
    """Host-independent clean-up of a fresh debootstrap."""
    # Shared host keys would make every host identical: each host gets its own.
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    # Each host gets its own machine-id at copy time.
    (root / "etc/machine-id").write_text("")
    dbus_id = root / "var/lib/dbus/machine-id"
    if dbus_id.is_symlink() or dbus_id.exists():
        dbus_id.unlink()
    apt_lists = root / "var/lib/apt/lists"
    for f in apt_lists.glob("*"):
        if f.is_file() and f.name != "lock":
            f.unlink()
    # cached .debs from debootstrap are not needed any more
    for f in (root / "var/cache/apt/archives").glob("*.deb"):
        f.unlink()


def _du(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            total += st.st_size
    return total


# ---------------------------------------------------------------- host copies

def make_host_root(base: Path, host_dir: Path, mode: str) -> Path:
    """Create the writable root of one host from ``base``; return its path.

    ``copy``: ``cp -a --reflink=auto`` (a full copy on ext4, a reflink on
    btrfs/xfs). ``overlay``: an overlayfs with the base as lower layer, the
    host's changes in ``host_dir/upper``.
    """
    if mode not in COPY_MODES:
        raise TestbedError(f"unknown copy mode {mode!r}; choose one of {COPY_MODES}")
    host_dir.mkdir(parents=True, exist_ok=True)
    root = host_dir / "rootfs"
    if mode == "copy":
        if root.exists():
            safe_rmtree(root)
        run(["cp", "-a", "--reflink=auto", str(base), str(root)], timeout=900)
        return root
    upper, work = host_dir / "upper", host_dir / "work"
    for d in (upper, work, root):
        d.mkdir(exist_ok=True)
    run(
        [
            "mount",
            "-t",
            "overlay",
            "overlay",
            "-o",
            f"lowerdir={base},upperdir={upper},workdir={work}",
            str(root),
        ]
    )
    return root


def is_mountpoint(path: Path) -> bool:
    target = os.path.realpath(path)
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            if line.split()[4] == target:
                return True
    except FileNotFoundError:
        pass
    return False


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` (deepest first)."""
    prefix = os.path.realpath(path)
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mp = line.split()[4].replace("\\040", " ")
        if mp == prefix or mp.startswith(prefix + "/"):
            found.append(mp)
    return sorted(set(found), key=len, reverse=True)


def safe_rmtree(path: Path) -> None:
    """Delete ``path`` after unmounting whatever is mounted below it.

    debootstrap mounts /proc and /sys into its target and an overlay host
    root is a mount point: a plain rmtree over a live mount would delete
    files outside the tree. Refuses when a mount cannot be removed.
    """
    for mp in mounts_under(path):
        run(["umount", mp], check=False)
        if is_mountpoint(Path(mp)):
            run(["umount", "-l", mp], check=False)
    left = mounts_under(path)
    if left:
        raise TestbedError(f"refusing to delete {path}: still mounted: {left}")
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def remove_host_root(host_dir: Path) -> None:
    """Unmount (if overlay) and delete a host's root; safe if already gone."""
    safe_rmtree(host_dir)
