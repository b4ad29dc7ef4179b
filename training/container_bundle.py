"""Make your own OCI bundle for `srun --container=BUNDLE` from a container image (a root
filesystem, e.g. one container_image.py made), with your home, the work area and the GPU device
files inside.

Run it as yourself, on a login or compute host (it runs `runc spec --rootless`, which writes YOUR
uid and gid into the bundle's user namespace mapping: a bundle made by another user fails with
"fchown fd 7: operation not permitted"):

    python3 container_bundle.py --image /srv/cluster-training/containers/training/rootfs \\
        --bundle ~/bundles/training --bind-home --bind /srv/cluster-training
    srun --nodes=2 --container="$HOME/bundles/training" /opt/cluster-training/venv/bin/python train.py

The bundle is a directory: config.json and ``rootfs``, a skeleton of the image's top level that
is yours (runc refuses a rootfs that is a link): the image's directories are bound into it
read-only, so the image is shared, never copied or written. What config.json gets beyond runc's
rootless default:

- each --bind directory at the same path, read-write (your home, the work area); runc makes the
  mount point in your skeleton, or finds it in the image (container_image.py --mount-point);
- every device file matching --devices (default /dev/nvidia*), at the same path: which of them a
  job may open is still Slurm's device cgroup's decision (ConstrainDevices), as outside. On a
  cluster-cli cluster the container start (oci.conf's RunTimeRun) replaces them with the GPU files
  of the node each step runs on, so a bundle made anywhere serves every node;
- the host's /etc/hosts and /etc/resolv.conf, read-only, where the image has those files;
- a tmpfs on /tmp (the image is read-only); the host's name and processes (no UTS or PID
  namespace: the network is the host's too, and Slurm sees the step's processes as they are);
- the working directory: the first --bind (Slurm does not pass srun's).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

DEFAULT_DEVICES = "/dev/nvidia*"
# The host's name lookup, bound read-only over the image's files of that name where it has them
# (container_image.py makes both): the nodes' names and addresses as the host knows them
# (torchrun's rendezvous at a node's NodeAddr; debootstrap's minbase has no /etc/hosts at all).
HOST_FILES = ("/etc/hosts", "/etc/resolv.conf")
# The host's: its name (the network is the host's too) and its processes, as Enroot and Apptainer
# keep them: Slurm signals and accounts the step's processes as any step's, and each torchrun agent
# has its own PID (in a PID namespace of its own each is PID 1, and two nodes of one host then give
# the same name to the rendezvous, which waits forever for the second).
SHARED_NAMESPACES = frozenset({"uts", "pid"})
# With the host's PID namespace, the host's /proc (a user namespace may not mount a procfs for it).
HOST_PROC = {"destination": "/proc", "type": "bind", "source": "/proc", "options": ["rbind", "nosuid", "nodev", "noexec"]}
# Filled by runc itself (procfs, sysfs, a tmpfs /dev, /tmp): never bound from the image.
RUNTIME_DIRS = frozenset({"dev", "proc", "sys", "tmp"})


class BundleError(Exception):
    pass


def spec(bundle: Path, runtime: str) -> dict:
    """runc's rootless default config.json, made as the calling user."""
    subprocess.run([runtime, "spec", "--rootless", "--bundle", str(bundle)], check=True, capture_output=True, text=True)
    return json.loads((bundle / "config.json").read_text(encoding="utf-8"))


def skeleton(image: Path, rootfs: Path) -> list[dict]:
    """Make ``rootfs`` (yours) a skeleton of the image's top level: its links as links, its
    directories empty; returns the read-only binds of the image's non-empty directories onto them.
    runc refuses a rootfs that is a link, and a copy of the image per user would cost its size: this
    way the image is shared and never written, and runc, rootless, can make mount points (a home,
    the work area) in the user's own empty directories."""
    rootfs.mkdir(mode=0o755, exist_ok=True)
    binds = []
    for entry in sorted(image.iterdir()):
        inside = rootfs / entry.name
        if entry.is_symlink():
            inside.symlink_to(os.readlink(entry))
        elif entry.is_dir():
            inside.mkdir(mode=0o755)
            if entry.name not in RUNTIME_DIRS and _has_entries(entry):
                binds.append({"destination": f"/{entry.name}", "type": "bind", "source": str(entry),
                              "options": ["rbind", "ro", "nosuid"]})
    return binds


def _has_entries(directory: Path) -> bool:
    """Whether ``directory`` holds anything; one you may not read (the image's /root) is left empty."""
    try:
        return any(directory.iterdir())
    except PermissionError:
        return False


def check_bind_points(image: Path, binds: list[str], image_binds: list[dict]) -> None:
    """A bind under a directory that comes read-only from the image needs its mount point there."""
    bound = {mount["destination"] for mount in image_binds}
    for path in binds:
        top = "/" + Path(path).relative_to("/").parts[0]
        if top in bound and not (image / Path(path).relative_to("/")).is_dir():
            raise BundleError(
                f"--bind {path}: {top} comes from the image, which has no {path}: make the mount point in the "
                f"image (container_image.py --mount-point {path})"
            )


def host_file_binds(image: Path) -> list[dict]:
    return [
        {"destination": path, "type": "bind", "source": path, "options": ["bind", "ro"]}
        for path in HOST_FILES
        if os.path.isfile(path) and (image / path.lstrip("/")).is_file() and not (image / path.lstrip("/")).is_symlink()
    ]


def make_config(config: dict, image_binds: list[dict], binds: list[str], devices: list[str]) -> dict:
    mounts = list(image_binds)
    mounts += [mount if mount["destination"] != "/proc" else HOST_PROC for mount in config["mounts"]
               if mount["destination"] != "/tmp"]
    mounts.append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]})
    for path in binds:
        mounts.append({"destination": path, "type": "bind", "source": path, "options": ["rbind", "rw"]})
    for device in devices:
        mounts.append({"destination": device, "type": "bind", "source": device, "options": ["bind", "rw"]})
    config["mounts"] = mounts
    config["root"] = {"path": "rootfs", "readonly": True}
    linux = config.setdefault("linux", {})
    linux["namespaces"] = [space for space in linux.get("namespaces", []) if space.get("type") not in SHARED_NAMESPACES]
    config.pop("hostname", None)
    process = config.setdefault("process", {})
    process["terminal"] = False
    # your home, not runc's /root for the container's uid 0 (Slurm appends the job's own after these)
    home = pwd.getpwuid(os.getuid()).pw_dir
    process["env"] = [item for item in process.get("env", []) if not item.startswith("HOME=")] + [f"HOME={home}"]
    if binds:
        process["cwd"] = binds[0]
    return config


def _remove_skeleton(rootfs: Path) -> None:
    """Remove a previous run's skeleton: empty directories and links only; anything else there is
    not ours to delete."""
    for entry in rootfs.iterdir():
        if not entry.is_symlink() and (not entry.is_dir() or any(entry.iterdir())):
            raise BundleError(f"{rootfs} holds {entry.name}, which a bundle's skeleton does not: not replacing it")
    shutil.rmtree(rootfs)


def make_bundle(image: Path, bundle: Path, binds: list[str], device_globs: list[str], runtime: str = "runc") -> Path:
    image = image.resolve()
    if not (image / "bin").exists() or not image.is_dir():
        raise BundleError(f"{image}: not a root filesystem (no bin/)")
    for path in binds:
        if not os.path.isabs(path) or not os.path.isdir(path):
            raise BundleError(f"--bind {path}: not an absolute path of a directory here")
    devices = sorted({path for pattern in device_globs for path in glob.glob(pattern)})
    bundle.mkdir(mode=0o700, parents=True, exist_ok=True)
    if os.stat(bundle).st_uid != os.getuid():
        raise BundleError(f"{bundle}: not yours: make your own bundle directory")
    rootfs = bundle / "rootfs"
    if rootfs.is_symlink() or rootfs.is_file():
        rootfs.unlink()
    elif rootfs.exists():
        _remove_skeleton(rootfs)
    (bundle / "config.json").unlink(missing_ok=True)
    binds = [os.path.normpath(path) for path in binds]
    image_binds = skeleton(image, rootfs)
    check_bind_points(image, binds, image_binds)
    config = make_config(spec(bundle, runtime), image_binds + host_file_binds(image), binds, devices)
    (bundle / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return bundle


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", type=Path, required=True, help="the image's root filesystem")
    parser.add_argument("--bundle", type=Path, required=True, help="the bundle directory to make (yours)")
    parser.add_argument("--bind", action="append", default=[], help="a host directory to have inside (repeat)")
    parser.add_argument("--bind-home", action="store_true", help="bind your home directory (before any --bind)")
    parser.add_argument("--devices", action="append", help=f"device files to have inside, a glob (default {DEFAULT_DEVICES})")
    parser.add_argument("--runtime", default="runc", help="the OCI runtime whose rootless spec to start from")
    args = parser.parse_args(argv)
    binds = ([pwd.getpwuid(os.getuid()).pw_dir] if args.bind_home else []) + args.bind
    try:
        bundle = make_bundle(args.image, args.bundle, binds, args.devices or [DEFAULT_DEVICES], args.runtime)
    except (BundleError, OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or ""
        print(f"container_bundle.py: {error} {detail}".strip(), file=sys.stderr)
        return 1
    print(f"bundle {bundle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
