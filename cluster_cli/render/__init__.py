"""Render every file of a cluster once, on the control node, from the resolved model."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cluster_cli.cluster import Cluster
from cluster_cli.render.alert_rules import render_alert_rules
from cluster_cli.render.cgroup_conf import render_cgroup_conf
from cluster_cli.render.dashboards import render_dashboards
from cluster_cli.render.gres_conf import render_gres_conf
from cluster_cli.render.health_conf import render_health_document
from cluster_cli.render.job_templates import render_job_templates
from cluster_cli.render.alertmanager_conf import ALERTMANAGER_CONFIG, render_alertmanager_conf
from cluster_cli.render.monitoring import render_monitoring
from cluster_cli.render.nccl_conf import render_nccl_conf
from cluster_cli.render.oci_conf import render_oci_conf
from cluster_cli.render.slurm_conf import render_slurm_conf
from cluster_cli.render.slurmdbd_conf import render_slurmdbd_conf
from cluster_cli.render.sssd_conf import render_sssd
from cluster_cli.render.mount_units import render_mount_units
from cluster_cli.render.nfs_exports import render_nfs_exports
from cluster_cli.render.topology_conf import render_topology_conf


@dataclass(frozen=True)
class RenderedFile:
    path: str  # relative to the build directory
    content: str
    mode: int = 0o644
    secret: bool = False


def render_configs(cluster: Cluster, db_password: str | None) -> list[RenderedFile]:
    """The Slurm and NCCL configuration files, the health check's document, the alert rules for the
    cluster's Prometheus and its dashboards, Prometheus' configuration and the Slurm exporter's code
    where the inventory has a monitoring host (and Alertmanager's, a secret, with receivers), sssd.conf and its CA where it has a directory, the mount
    units where it has storage, the exports where it has an NFS server, the job
    templates where there are login hosts, oci.conf where containers are on;
    slurmdbd.conf only with accounting."""
    files = [
        RenderedFile("slurm/slurm.conf", render_slurm_conf(cluster)),
        RenderedFile("slurm/gres.conf", render_gres_conf(cluster)),
        RenderedFile("slurm/cgroup.conf", render_cgroup_conf(cluster)),
        RenderedFile("nccl/nccl.conf", render_nccl_conf(cluster)),
        RenderedFile("monitoring/cluster-alerts.yml", render_alert_rules(cluster)),
    ]
    files += [RenderedFile(path, text) for path, text in render_health_document(cluster).items()]
    files += [RenderedFile(path, text) for path, text in render_dashboards(cluster).items()]
    files += [RenderedFile(path, text) for path, text in render_monitoring(cluster).items()]
    files += [RenderedFile(path, text) for path, text in render_sssd(cluster).items()]
    files += [RenderedFile(path, text) for path, text in render_mount_units(cluster).items()]
    files += [RenderedFile(path, text) for path, text in render_nfs_exports(cluster).items()]
    if cluster.inventory.login:
        # only login hosts get them (roles/login); a cluster without one, the GPU proof's among
        # them (its kit carries no templates), has none to render
        files += [RenderedFile(path, text, mode) for path, text, mode in render_job_templates(cluster)]
    topology = render_topology_conf(cluster)
    if topology is not None:
        files.append(RenderedFile("slurm/topology.conf", topology))
    oci = render_oci_conf(cluster)
    if oci is not None:
        files.append(RenderedFile("slurm/oci.conf", oci))
    alertmanager = render_alertmanager_conf(cluster)
    if alertmanager is not None:
        files.append(RenderedFile(ALERTMANAGER_CONFIG, alertmanager, mode=0o600, secret=True))
    if db_password is not None:
        slurmdbd = render_slurmdbd_conf(cluster, db_password)
        if slurmdbd is not None:
            files.append(RenderedFile("slurm/slurmdbd.conf", slurmdbd, mode=0o600, secret=True))
    return files


BUILD_MARKER = ".cluster-cli-build"
_MARKER_TEXT = "cluster-cli made this directory and replaces all of it but slurm-build/ on every render.\n"
#: Subdirectories a render carries over from the previous build: SLURM_BUILD_DIR holds the NVML
#: plugin package deploy fetched from the build host, reused on the next deploy.
SLURM_BUILD_DIR = "slurm-build"
KEPT_DIRS = (SLURM_BUILD_DIR,)


class NotABuildDirectory(Exception):
    """A build directory that would be replaced holds something cluster-cli did not put there."""


def check_replaceable(directory: Path) -> None:
    """Refuse to replace a directory unless it is new, empty, or one cluster-cli made (its marker
    is there): ``render -o ~`` must not delete a home directory."""
    directory = directory.resolve()
    if not directory.exists():
        return
    if not directory.is_dir():
        raise NotABuildDirectory(f"{directory} exists and is not a directory; not replacing it")
    if (directory / BUILD_MARKER).is_file() or not any(directory.iterdir()) or _is_unmarked_build(directory):
        return
    raise NotABuildDirectory(
        f"{directory} is not empty and cluster-cli did not make it (no {BUILD_MARKER} in it); "
        "its contents would be deleted: choose a new or empty directory"
    )


def _is_unmarked_build(directory: Path) -> bool:
    """A build from before the marker: only slurm/, nccl/ and ansible/, with our generated vars."""
    if not {path.name for path in directory.iterdir()} <= {"slurm", "nccl", "ansible"}:
        return False
    variables = directory / "ansible" / "cluster_vars.yml"
    if not variables.is_file():
        return False
    with variables.open("rb") as handle:
        return handle.read(64).startswith(b"# Generated by cluster-cli")


def write_files(directory: Path, files: list[RenderedFile]) -> None:
    """Write all files or none: build beside the target, then swap it in. Directories are 0700.
    Raises NotABuildDirectory where ``check_replaceable`` refuses the target."""
    directory = directory.resolve()
    check_replaceable(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        os.chmod(staging, 0o700)
        made = {staging}
        for item in [RenderedFile(BUILD_MARKER, _MARKER_TEXT), *files]:
            target = staging / item.path
            if target.parent not in made:
                target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                made.add(target.parent)
            _write_new(target, item.content.encode("utf-8"), item.mode)
        swap_in(staging, directory, KEPT_DIRS)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """A new file of exactly ``mode`` (not narrowed by the umask) holding ``data``; written with
    os.write, without a file object's buffer and its checks (three system calls fewer a file)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(descriptor, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
    finally:
        os.close(descriptor)


def swap_in(staging: Path, directory: Path, keep: tuple[str, ...] = ()) -> None:
    """Put ``staging`` in the place of ``directory``: the previous one goes aside under a fresh
    name, comes back if the swap fails (never no directory at all), and is removed after it, its
    ``keep`` subdirectories carried over into the new one."""
    # the previous build goes to a fresh name of our own, never to one that may already exist
    previous = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old.", dir=directory.parent))
    previous.rmdir()
    moved_aside = False
    if directory.exists():
        directory.rename(previous)
        moved_aside = True
    try:
        staging.rename(directory)
    except BaseException:
        if moved_aside:  # put the previous build back: never leave no build at all
            previous.rename(directory)
        raise
    if moved_aside:
        for name in keep:
            if (previous / name).is_dir() and not (directory / name).exists():
                (previous / name).rename(directory / name)
        shutil.rmtree(previous, ignore_errors=True)
