"""A local apt repository (and pip wheelhouse) for hosts with no route out.

The packages and the closure of their dependencies are resolved with a
private apt configuration (its own sources, lists and cache under the cache
dir) for the target release, so a bookworm control node can build a trixie
mirror too and this machine's own apt state is never touched. The result is
a flat repository::

    <out>/Packages, Packages.gz   (dpkg-scanpackages)
    <out>/pool/*.deb
    <out>/wheels/*.whl            (optional wheelhouse)
    <out>/mirror.json             (what was asked, what was resolved, timings)

served read-only to every host at /mirror, with ``deb [trusted=yes] file:/mirror ./``
as the hosts' only apt source.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .proc import TestbedError, Timer, run
from .rootfs import DEFAULT_DEBIAN_MIRROR, DEFAULT_SECURITY_MIRROR, RELEASES

log = logging.getLogger("testbed")

#: What a Slurm cluster deployment installs (roles/), plus what Ansible's
#: modules need on the hosts.
DEFAULT_MIRROR_PACKAGES: tuple[str, ...] = (
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "slurm-client",
    "libpam-slurm-adopt",
    "munge",
    "mariadb-server",
    "mariadb-client",
    "python3-pymysql",
    "python3-venv",
    "python3-pip",
    "hello",
    # molecule/tests/test_80_become.py: an unprivileged deployment user with sudo
    "sudo",
)

ARCH = "amd64"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


@dataclass(frozen=True)
class MirrorResult:
    path: Path
    release: str
    packages: list[str]  # what was asked for
    resolved: list[str]  # every package in the repository
    debs: int
    wheels: int
    seconds: float


def _apt_root(cache_dir: Path, release: str) -> Path:
    return cache_dir / "apt" / release


def apt_options(root: Path) -> list[str]:
    """apt -o options that make apt use only the private state under ``root``."""
    return [
        "-o", f"Dir::Etc::SourceList={root / 'sources.list'}",
        "-o", f"Dir::Etc::SourceParts={root / 'sources.list.d'}",
        "-o", f"Dir::Etc::Preferences={root / 'preferences'}",
        "-o", f"Dir::Etc::PreferencesParts={root / 'preferences.d'}",
        "-o", f"Dir::State={root / 'state'}",
        "-o", f"Dir::State::Status={root / 'state' / 'status'}",
        "-o", f"Dir::Cache={root / 'cache'}",
        "-o", f"APT::Architecture={ARCH}",
        "-o", f"APT::Architectures={ARCH}",
        "-o", "APT::Sandbox::User=root",
        "-o", "Acquire::Languages=none",
        "-o", "Debug::NoLocking=1",
    ]


def release_sources(release: str, debian_mirror: str = DEFAULT_DEBIAN_MIRROR,
                    security_mirror: str = DEFAULT_SECURITY_MIRROR) -> list[str]:
    """The sources.list lines of a release: main, its updates and its security suite."""
    return [
        f"deb [signed-by={KEYRING}] {debian_mirror} {release} main",
        f"deb [signed-by={KEYRING}] {debian_mirror} {release}-updates main",
        f"deb [signed-by={KEYRING}] {security_mirror} {release}-security main",
    ]


def make_apt_root(root: Path, sources: list[str]) -> list[str]:
    """A private apt root at ``root`` with these sources, its lists updated; apt's options for it."""
    for d in ("sources.list.d", "preferences.d", "state/lists/partial",
              "cache/archives/partial"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "state" / "status").touch()
    (root / "sources.list").write_text("".join(f"{line}\n" for line in sources))
    opts = apt_options(root)
    run(["apt-get", *opts, "update"], timeout=900)
    return opts


def prepare_apt(cache_dir: Path, release: str, debian_mirror: str = DEFAULT_DEBIAN_MIRROR,
                security_mirror: str = DEFAULT_SECURITY_MIRROR) -> list[str]:
    """Write the private apt config for ``release`` and update its lists."""
    if release not in RELEASES:
        raise TestbedError(f"unsupported release {release!r}")
    return make_apt_root(_apt_root(cache_dir, release), release_sources(release, debian_mirror, security_mirror))


def resolve_closure(opts: list[str], packages: list[str]) -> list[str]:
    """Every real package the given ones depend on (Depends + Pre-Depends),
    recursively, all alternatives included."""
    cp = run(
        ["apt-cache", *opts, "depends", "--recurse", "--no-recommends", "--no-suggests",
         "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages],
        timeout=600,
    )
    names: set[str] = set()
    for line in cp.stdout.splitlines():
        if not line or line[0].isspace() or line.startswith("<"):
            continue  # indented: a relation; <x>: a virtual package
        names.add(line.strip().split(":")[0])
    missing = [p for p in packages if p not in names]
    if missing:
        raise TestbedError(f"not found in the archive: {missing}")
    return sorted(names)


_URI_RE = re.compile(r"^'(?P<uri>[^']+)' (?P<file>\S+) (?P<size>\d+) (?P<hash>\S+)")


def download(opts: list[str], names: list[str], pool: Path) -> int:
    """Fetch the candidate .deb of every name into ``pool``; skip files already there.

    Returns how many were downloaded now.
    """
    pool.mkdir(parents=True, exist_ok=True)
    cp = run(["apt-get", *opts, "download", "--print-uris", *names], timeout=600)
    wanted: dict[str, str] = {}
    for line in cp.stdout.splitlines():
        m = _URI_RE.match(line)
        if m:
            wanted[m.group("file")] = m.group("uri")
    todo = [f for f in wanted if not (pool / f).exists()]
    if todo:
        # apt-get download takes package names; a filename is name_version_arch.deb
        pkgs = [f.split("_")[0] for f in todo]
        for i in range(0, len(pkgs), 200):
            run(["apt-get", *opts, "download", *pkgs[i:i + 200]], cwd=pool, timeout=1800)
    # keep only what the closure wants (older versions from earlier builds go)
    for f in pool.glob("*.deb"):
        if f.name not in wanted:
            f.unlink()
    return len(todo)


def index(out: Path) -> None:
    """Write Packages and Packages.gz for the flat repository in ``out``."""
    if shutil.which("dpkg-scanpackages") is None:
        raise TestbedError("dpkg-scanpackages missing (apt-get install dpkg-dev)")
    cp = run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], cwd=out,
             timeout=600)
    (out / "Packages").write_text(cp.stdout)
    run(["gzip", "-9nkf", "Packages"], cwd=out)


def build_wheelhouse(out: Path, wheels: list[Path], pip_requirements: list[str],
                     find_links: list[Path], python_version: str) -> int:
    """Copy local wheel files and ``pip download`` requirements (binary only,
    for the hosts' Python and platform) into ``out/wheels``."""
    wh = out / "wheels"
    wh.mkdir(parents=True, exist_ok=True)
    for w in wheels:
        if not w.is_file():
            raise TestbedError(f"no wheel file {w}")
        dst = wh / w.name
        if not dst.exists() or dst.stat().st_size != w.stat().st_size:
            shutil.copy2(w, dst)
    if pip_requirements:
        argv = ["python3", "-m", "pip", "download", "--dest", str(wh),
                "--only-binary=:all:", "--python-version", python_version,
                "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
                "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
                "--find-links", str(wh)]
        for fl in find_links:
            argv += ["--find-links", str(fl)]
        run(argv + pip_requirements, timeout=1800)
    return len(list(wh.glob("*.whl")))


PYTHON_VERSION = {"bookworm": "3.11", "trixie": "3.13"}


def build_mirror(
    out: Path,
    release: str = "bookworm",
    packages: list[str] | tuple[str, ...] = DEFAULT_MIRROR_PACKAGES,
    cache_dir: Path | None = None,
    wheels: list[Path] | None = None,
    pip_requirements: list[str] | None = None,
    find_links: list[Path] | None = None,
    debian_mirror: str = DEFAULT_DEBIAN_MIRROR,
    security_mirror: str = DEFAULT_SECURITY_MIRROR,
) -> MirrorResult:
    """Build (or refresh) the repository in ``out``; .debs already there are reused."""
    from .core import DEFAULT_CACHE_DIR

    cache = cache_dir if cache_dir is not None else DEFAULT_CACHE_DIR
    pkgs = sorted(set(packages))
    if not pkgs:
        raise TestbedError("no packages given")
    timings: dict[str, float] = {}
    lock_dir = cache / "apt"
    lock_dir.mkdir(parents=True, exist_ok=True)
    # the private apt state of a release is shared by every build (and by
    # concurrent test runs): one at a time
    with open(lock_dir / f".{release}.lock", "w") as lock, Timer() as total:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with Timer() as t:
            opts = prepare_apt(cache, release, debian_mirror, security_mirror)
        timings["apt_update_seconds"] = round(t.seconds, 1)
        with Timer() as t:
            names = resolve_closure(opts, pkgs)
        timings["resolve_seconds"] = round(t.seconds, 1)
        out.mkdir(parents=True, exist_ok=True)
        with Timer() as t:
            fetched = download(opts, names, out / "pool")
        timings["download_seconds"] = round(t.seconds, 1)
        with Timer() as t:
            index(out)
        timings["index_seconds"] = round(t.seconds, 1)
        nwheels = 0
        if wheels or pip_requirements:
            with Timer() as t:
                nwheels = build_wheelhouse(out, list(wheels or []), list(pip_requirements or []),
                                           list(find_links or []), PYTHON_VERSION[release])
            timings["wheels_seconds"] = round(t.seconds, 1)
    debs = len(list((out / "pool").glob("*.deb")))
    size = sum(f.stat().st_size for f in (out / "pool").glob("*.deb"))
    meta = {
        "release": release,
        "packages": pkgs,
        "resolved": names,
        "debs": debs,
        "downloaded_now": fetched,
        "size_bytes": size,
        "wheels": nwheels,
        "timings": timings,
        "total_seconds": round(total.seconds, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (out / "mirror.json").write_text(json.dumps(meta, indent=2) + "\n")
    os.chmod(out, 0o755)
    return MirrorResult(out, release, pkgs, names, debs, nwheels, total.seconds)


def default_mirror_dir(cache_dir: Path, release: str) -> Path:
    return cache_dir / "mirror" / release
