"""Render every file of a cluster once, on the control node, from the resolved model."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cluster_cli.cluster import Cluster
from cluster_cli.render.cgroup_conf import render_cgroup_conf
from cluster_cli.render.gres_conf import render_gres_conf
from cluster_cli.render.nccl_conf import render_nccl_conf
from cluster_cli.render.slurm_conf import render_slurm_conf
from cluster_cli.render.slurmdbd_conf import render_slurmdbd_conf
from cluster_cli.render.topology_conf import render_topology_conf


@dataclass(frozen=True)
class RenderedFile:
    path: str  # relative to the build directory
    content: str
    mode: int = 0o644
    secret: bool = False


def render_configs(cluster: Cluster, db_password: str | None) -> list[RenderedFile]:
    """The Slurm and NCCL configuration files; slurmdbd.conf only with accounting."""
    files = [
        RenderedFile("slurm/slurm.conf", render_slurm_conf(cluster)),
        RenderedFile("slurm/gres.conf", render_gres_conf(cluster)),
        RenderedFile("slurm/cgroup.conf", render_cgroup_conf(cluster)),
        RenderedFile("nccl/nccl.conf", render_nccl_conf(cluster)),
    ]
    topology = render_topology_conf(cluster)
    if topology is not None:
        files.append(RenderedFile("slurm/topology.conf", topology))
    if db_password is not None:
        slurmdbd = render_slurmdbd_conf(cluster, db_password)
        if slurmdbd is not None:
            files.append(RenderedFile("slurm/slurmdbd.conf", slurmdbd, mode=0o600, secret=True))
    return files


def write_files(directory: Path, files: list[RenderedFile]) -> None:
    """Write all files or none: build beside the target, then swap it in. Directories are 0700."""
    directory = directory.resolve()
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        os.chmod(staging, 0o700)
        for item in files:
            target = staging / item.path
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, item.mode)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(item.content)
            os.chmod(target, item.mode)
        previous = directory.with_name(f".{directory.name}.old")
        if previous.exists():
            shutil.rmtree(previous)
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
            shutil.rmtree(previous, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
