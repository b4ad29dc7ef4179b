"""oci.conf: how slurmstepd calls the container runtime for `srun --container` (cluster_cli/containers.py)."""

from __future__ import annotations

from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.containers import oci_conf_defaults
from cluster_cli.render.common import format_value, header, merge


def oci_conf_settings(cluster: Cluster) -> dict[str, Any]:
    containers = cluster.inventory.containers
    return merge(oci_conf_defaults(containers.runtime), containers.oci_conf)


def render_oci_conf(cluster: Cluster) -> str | None:
    """The file, or None where containers are off (no oci.conf: Slurm ignores `--container`)."""
    if not cluster.inventory.containers.enabled:
        return None
    settings = oci_conf_settings(cluster)
    lines = [header(cluster.name, "oci.conf").rstrip("\n")]
    # values are patterns with spaces: each in double quotes (the model refuses a '"' in one)
    lines += [f'{key}="{format_value(settings[key], yes="true", no="false")}"' for key in sorted(settings, key=str.lower)]
    return "\n".join(lines) + "\n"
