"""gres.conf: `AutoDetect=nvml` for NVML groups, explicit `File=` lines otherwise.

A node gets either AutoDetect or Name=gpu lines, never both: slurmd refuses duplicate
definitions. `%n` is not expanded in `File=`, so single-host nodes get a line each.
"""

from __future__ import annotations

from cluster_cli import hostlist
from cluster_cli.cluster import Cluster
from cluster_cli.render.common import header


def render_gres_conf(cluster: Cluster) -> str:
    lines = [header(cluster.name, "gres.conf").rstrip("\n")]
    for group in cluster.inventory.node_groups:
        gpus = group.gpus
        members = cluster.group_nodes(group)
        if gpus is None or not members:
            continue
        type_text = f" Type={gpus.type}" if gpus.type else ""
        names = cluster.group_hostlist(group)
        if gpus.autodetect == "nvml":
            lines.append(f"NodeName={names} AutoDetect=nvml")
        elif group.host is None:
            lines.append(f"NodeName={names} Name=gpu{type_text} File={gpus.devices}")
        else:
            for node in members:
                files = hostlist.compress(list(node.gpu_devices))
                lines.append(f"NodeName={node.name} Name=gpu{type_text} File={files}")
    return "\n".join(lines) + "\n"
