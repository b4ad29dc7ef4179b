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
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

# The resolver and downloader are the product's (cluster-cli bundle uses them too); these names
# stay importable from here for the test bed's other modules.
from cluster_cli.apt_repo import (  # noqa: F401
    ARCH,
    KEYRING,
    PYTHON_VERSION,
    AptRepoError,
    apt_options,
    download,
    index,
    make_apt_root,
    pip_download,
    release_sources,
    resolve_closure,
)

from .proc import TestbedError, Timer
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
    # roles/node_exporter and roles/prometheus (the default scenario's monitoring host)
    "prometheus-node-exporter",
    "prometheus",
    # MPI launch (cluster_cli/mpi_launch.py: the default scenario's mpi section)
    "libpmix-dev",
    "openmpi-bin",
    # roles/gpu_exporter (the gpu scenario's monitoring): Ansible's pip module imports packaging
    "python3-packaging",
    # roles/sssd (people.directory), and the bed's own LDAP server (molecule/shared/tasks/directory.yml,
    # CLUSTER_TB_DIRECTORY=1): always in the list, so one mirror serves runs with and without it
    "slapd",
    "ldap-utils",
    "sssd-ldap",
    "sssd-tools",
    "libnss-sss",
    "libpam-sss",
    # roles/storage_client's fuse.sshfs client (the default scenario's storage.mounts with
    # CLUSTER_TB_STORAGE=1): always in the list, like the directory's packages
    "sshfs",
    # container jobs (cluster_cli/containers.py's runtime; the default scenario with CLUSTER_TB_CONTAINERS=1)
    "runc",
)


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


def prepare_apt(cache_dir: Path, release: str, debian_mirror: str = DEFAULT_DEBIAN_MIRROR,
                security_mirror: str = DEFAULT_SECURITY_MIRROR) -> list[str]:
    """Write the private apt config for ``release`` and update its lists."""
    if release not in RELEASES:
        raise TestbedError(f"unsupported release {release!r}")
    return make_apt_root(_apt_root(cache_dir, release), release_sources(release, debian_mirror, security_mirror))


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
        pip_download(wh, pip_requirements, find_links, python_version)
    return len(list(wh.glob("*.whl")))


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
