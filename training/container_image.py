"""Make a container image for `srun --container` offline: a Debian root filesystem from the
package mirror (debootstrap, minbase, with python3) and the cluster's training environment copied
into it at its own path, so the same python, torch and mpi4py run inside.

Run as root on a cluster host that has the training environment and debootstrap (Debian's
package), with the mirror the host's apt uses (or --mirror):

    python3 container_image.py --out /srv/cluster-training/containers \\
        --venv /opt/cluster-training/venv --mount-point /srv/cluster-training

The image is kept by content: OUT/<key>/rootfs, where the key is a hash of the suite, the mirror,
the packages, the training environment's installed distributions and the mount points; OUT/training
links to the newest one. A second run with the same content reuses it (seconds), so CI builds it
once; --prune removes OUT's other images. It prints one line, ``container-image {json}``: the rootfs, the key, whether it was built,
the seconds it took and its size in bytes.

--mount-point makes empty directories in the image where bundles bind host directories (the work
area); runc, rootless, cannot make them in a root-owned image. /home is there already.
Users make their bundle with container_bundle.py (as themselves: `runc spec --rootless` writes
their own uid mapping).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = ("python3",)
# A file in the image that says what made it (the smoke check reads it inside the container).
MARKER = "etc/cluster-cli-image"
LINK = "training"
# Raised when what an image holds changes without its inputs changing (a new key, a new build).
IMAGE_FORMAT = 2
# Mount points for the host's name lookup (container_bundle.py binds the host's over them).
HOST_FILES = ("etc/hosts", "etc/resolv.conf")
RELEASE_FILE = Path("/etc/os-release")


def host_suite() -> str:
    """The host's own Debian release (VERSION_CODENAME): the image's python is the one the
    training environment was made with."""
    for line in RELEASE_FILE.read_text(encoding="utf-8").splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    raise SystemExit(f"{RELEASE_FILE}: no VERSION_CODENAME")


def host_mirror() -> str:
    """The first http(s) Debian mirror apt uses on this host (deb822 or one-line sources)."""
    sources = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in sources:
        if not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if line.startswith("URIs:") and len(words) > 1:
                uris = [word for word in words[1:] if "security" not in word]
            elif words[:1] == ["deb"]:
                uris = [word for word in words[1:] if word.startswith(("http://", "https://", "file:"))]
                uris = [uri for uri in uris if "security" not in uri]
            else:
                continue
            if uris:
                return uris[0]
    raise SystemExit("no Debian mirror in /etc/apt/sources.list*: give --mirror")


def venv_fingerprint(venv: Path) -> list[str]:
    """What decides the environment's content: its Python and each installed distribution."""
    config = (venv / "pyvenv.cfg").read_text(encoding="utf-8") if (venv / "pyvenv.cfg").is_file() else ""
    found = sorted(path.name for path in venv.glob("lib/python*/site-packages/*.dist-info"))
    return [config, *found]


def image_key(suite: str, mirror: str, venv: Path, mount_points: list[str]) -> str:
    text = json.dumps([IMAGE_FORMAT, suite, mirror, list(PACKAGES), str(venv), venv_fingerprint(venv),
                       sorted(mount_points)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def tree_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def build(rootfs: Path, suite: str, mirror: str, venv: Path, mount_points: list[str]) -> None:
    """debootstrap into ``rootfs``, then the environment and the mount points."""
    subprocess.run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", suite, str(rootfs), mirror],
        check=True, stdout=subprocess.DEVNULL,
    )
    # the apt lists and package cache: nothing a job needs (about 60 MB)
    for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (rootfs / cache).glob("*"):
            if entry.is_file():
                entry.unlink()
    destination = rootfs / str(venv).lstrip("/")
    destination.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", "--reflink=auto", str(venv), str(destination)], check=True)
    for point in mount_points:
        (rootfs / point.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for name in HOST_FILES:
        (rootfs / name).touch(exist_ok=True)
    (rootfs / MARKER).write_text(f"cluster-cli container image: {suite} from {mirror}, {venv}\n", encoding="utf-8")


def prune(out: Path, keep: str) -> list[str]:
    """Remove the images of ``out`` other than ``keep`` (bundles made from them stop working)."""
    removed = []
    for entry in sorted(out.iterdir()):
        if entry.is_dir() and not entry.is_symlink() and not entry.name.startswith(".") and entry.name != keep \
                and (entry / "rootfs" / MARKER).is_file():
            shutil.rmtree(entry)
            removed.append(entry.name)
    return removed


def make_image(out: Path, venv: Path, mount_points: list[str], suite: str, mirror: str) -> dict[str, object]:
    key = image_key(suite, mirror, venv, mount_points)
    image = out / key
    rootfs = image / "rootfs"
    started = time.monotonic()
    built = False
    if not (rootfs / MARKER).is_file():
        out.mkdir(parents=True, exist_ok=True)
        os.chmod(out, 0o755)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=out))
        try:
            os.chmod(staging, 0o755)
            build(staging / "rootfs", suite, mirror, venv, mount_points)
            if image.exists():
                shutil.rmtree(image)  # an unfinished one (no marker)
            staging.rename(image)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        built = True
    link = out / LINK
    fresh = out / f".{LINK}.{os.getpid()}"
    fresh.unlink(missing_ok=True)
    fresh.symlink_to(key)
    fresh.replace(link)  # atomic: a job never sees no link
    return {
        "rootfs": str(link / "rootfs"), "key": key, "built": built,
        "seconds": round(time.monotonic() - started, 1), "size_bytes": tree_size(rootfs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where images are kept (OUT/<key>, OUT/training)")
    parser.add_argument("--venv", type=Path, default=Path("/opt/cluster-training/venv"), help="the training environment")
    parser.add_argument("--mount-point", action="append", default=[], help="a directory to make in the image")
    parser.add_argument("--suite", help="Debian suite (default: this host's)")
    parser.add_argument("--mirror", help="Debian mirror (default: the first one apt uses here)")
    parser.add_argument("--prune", action="store_true", help="remove OUT's other images (bundles made from them break)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("container_image.py: run as root (debootstrap)", file=sys.stderr)
        return 2
    if not (args.venv / "bin" / "python").exists():
        print(f"container_image.py: {args.venv}: no training environment (bin/python)", file=sys.stderr)
        return 2
    result = make_image(args.out, args.venv, args.mount_point, args.suite or host_suite(), args.mirror or host_mirror())
    if args.prune:
        result["pruned"] = prune(args.out, str(result["key"]))
    print("container-image " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
