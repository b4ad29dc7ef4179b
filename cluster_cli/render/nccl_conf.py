"""/etc/nccl.conf: NCCL reads it in every process, so jobs need no environment set-up."""

from __future__ import annotations

from cluster_cli.cluster import Cluster
from cluster_cli.render.common import header


def render_nccl_conf(cluster: Cluster) -> str:
    env = cluster.inventory.nccl.env
    lines = [header(cluster.name, "nccl.conf").rstrip("\n")]
    lines += [f"{key}={env[key]}" for key in sorted(env)]
    return "\n".join(lines) + "\n"
