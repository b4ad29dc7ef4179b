"""oci.conf: how slurmstepd calls the container runtime for `srun --container` (cluster_cli/containers.py)."""

from __future__ import annotations

from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.containers import TASK_ENVIRONMENT_INSIDE, oci_conf_defaults, oci_run, target_series
from cluster_cli.render.cgroup_conf import cgroup_settings
from cluster_cli.render.common import format_value, header, merge
from cluster_cli.render.slurm_conf import global_settings


def _oci_run(cluster: Cluster, series: str) -> str:
    """cluster-cli-oci-run's arguments from slurm.conf and cgroup.conf: where a node's slurmd reads
    gres.conf (configless: its copy in SlurmdSpoolDir's conf-cache, %n being the node there as in
    slurm.conf), and whether it sets the task's GPU variables: where the series does not pass them
    in and tasks get local GPU indices."""
    settings = global_settings(cluster)
    slurm = cluster.inventory.slurm
    conf_dir = f"{settings['SlurmdSpoolDir']}/conf-cache" if slurm.configless else slurm.paths.conf_dir
    constrained = format_value(cgroup_settings(cluster).get("ConstrainDevices", False), yes="yes", no="no")
    local_indices = "task/cgroup" in str(settings.get("TaskPlugin", "")) and constrained.lower() == "yes"
    return oci_run(f"{conf_dir}/gres.conf", local_indices and series not in TASK_ENVIRONMENT_INSIDE)


def oci_conf_settings(cluster: Cluster) -> dict[str, Any]:
    containers = cluster.inventory.containers
    target = target_series(cluster.inventory)
    return merge(oci_conf_defaults(containers.runtime, _oci_run(cluster, target), target), containers.oci_conf)


def render_oci_conf(cluster: Cluster) -> str | None:
    """The file, or None where containers are off (no oci.conf: Slurm ignores `--container`)."""
    if not cluster.inventory.containers.enabled:
        return None
    settings = oci_conf_settings(cluster)
    lines = [header(cluster.name, "oci.conf").rstrip("\n")]
    # values are patterns with spaces: each in double quotes (the model refuses a '"' in one)
    lines += [f'{key}="{format_value(settings[key], yes="true", no="false")}"' for key in sorted(settings, key=str.lower)]
    return "\n".join(lines) + "\n"
