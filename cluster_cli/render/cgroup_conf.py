"""cgroup.conf: constrain cores, devices and memory; plugin chosen from the inventory."""

from __future__ import annotations

from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.render.common import header, key_value_lines, merge
from cluster_cli.slurm_keys import CGROUP_PLUGINS

CGROUP_DEFAULTS: dict[str, Any] = {
    "ConstrainCores": True,
    "ConstrainDevices": True,
    "ConstrainRAMSpace": True,
    "ConstrainSwapSpace": True,
}

def cgroup_settings(cluster: Cluster) -> dict[str, Any]:
    cgroup = cluster.inventory.cgroup
    derived: dict[str, Any] = {"CgroupPlugin": CGROUP_PLUGINS[cgroup.version]}
    return merge(CGROUP_DEFAULTS, derived, cgroup.overrides)


def render_cgroup_conf(cluster: Cluster) -> str:
    lines = [header(cluster.name, "cgroup.conf").rstrip("\n")]
    lines += key_value_lines(cgroup_settings(cluster), yes="yes", no="no")
    return "\n".join(lines) + "\n"
