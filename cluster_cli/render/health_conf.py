"""The node health check's expectations, one JSON file per compute host.

roles/slurmd installs the checker (roles/slurmd/files/cluster-cli-health, Slurm's
HealthCheckProgram) and this file beside it; slurmd runs the checker with SLURMD_NODENAME set, and
the checker looks its node up here: the CPUs, memory and GPU device files slurm.conf and gres.conf
give it, its spool directory, the slurm.conf its scontrol reads. The checker cannot import
cluster_cli, so the reason prefix travels in the file: it is defined here only.
"""

from __future__ import annotations

from typing import Any

from cluster_cli.cluster import Cluster, ManagedHost, SlurmNode
from cluster_cli.render.common import json_text

# A drain whose reason starts with this is the health check's own: it lifts it when the node
# passes again. Any other reason (an administrator's, `cluster-cli nodes drain`'s, Slurm's) it
# never touches.
HEALTH_REASON_PREFIX = "cluster-cli health:"
# Where roles/slurmd installs the checker and its configuration (slurmd passes the program no
# arguments, so the checker's default config path is this one; a unit test holds them equal).
HEALTH_PROGRAM_PATH = "/usr/local/sbin/cluster-cli-health"
HEALTH_CONFIG_PATH = "/etc/cluster-cli-health.json"
# The build directory's folder of per-host files: health/HOST.json.
HEALTH_BUILD_DIR = "health"


def _slurm_conf(cluster: Cluster, spool_dir: str) -> str:
    """The slurm.conf the node's scontrol reads: in configless mode the copy its slurmd fetched."""
    if cluster.inventory.slurm.configless:
        return f"{spool_dir}/conf-cache/slurm.conf"
    return f"{cluster.inventory.slurm.paths.conf_dir}/slurm.conf"


def node_expectations(cluster: Cluster, node: SlurmNode) -> dict[str, Any]:
    group = node.group
    spool_dir = f"{cluster.inventory.slurm.paths.spool_dir}/{node.name}"
    return {
        "cpus": group.cpus or group.sockets * group.cores_per_socket * group.threads_per_core,
        "real_memory_mb": group.real_memory_mb,
        "gpus": group.gpus.count if group.gpus else 0,
        "gpu_devices": list(node.gpu_devices),
        "slurm_conf": _slurm_conf(cluster, spool_dir),
        "free_space_dirs": [spool_dir, cluster.inventory.training.work_dir],
    }


def host_health_config(cluster: Cluster, host: ManagedHost) -> dict[str, Any]:
    settings = cluster.inventory.health_check
    return {
        "reason_prefix": HEALTH_REASON_PREFIX,
        "min_free_mb": settings.min_free_mb,
        "mounts": list(settings.mounts),
        "nodes": {node.name: node_expectations(cluster, node) for node in host.slurmd_nodes},
    }


def render_health_configs(cluster: Cluster) -> dict[str, str]:
    """Build directory path -> text, for every host that runs slurmd; none when the check is off."""
    if not cluster.inventory.health_check.enabled:
        return {}
    return {
        f"{HEALTH_BUILD_DIR}/{name}.json": json_text(host_health_config(cluster, host)) + "\n"
        for name, host in cluster.hosts.items()
        if host.slurmd_nodes
    }
