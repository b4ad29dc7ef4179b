"""topology.conf: tree (leaf and spine switches) or block."""

from __future__ import annotations

from cluster_cli import hostlist
from cluster_cli.cluster import Cluster
from cluster_cli.render.common import header


def render_topology_conf(cluster: Cluster) -> str | None:
    topology = cluster.inventory.topology
    if topology is None:
        return None
    lines = [header(cluster.name, "topology.conf").rstrip("\n")]
    if topology.plugin == "tree":
        for switch in topology.switches:
            if switch.nodes is not None:
                members = f"Nodes={hostlist.compress(hostlist.expand(switch.nodes))}"
            else:
                members = f"Switches={hostlist.compress(hostlist.expand(str(switch.switches)))}"
            speed = f" LinkSpeed={switch.link_speed}" if switch.link_speed else ""
            lines.append(f"SwitchName={switch.name} {members}{speed}")
    else:
        for block in topology.blocks:
            lines.append(f"BlockName={block.name} Nodes={hostlist.compress(hostlist.expand(block.nodes))}")
        if topology.block_sizes:
            lines.append(f"BlockSizes={','.join(str(size) for size in topology.block_sizes)}")
    return "\n".join(lines) + "\n"
