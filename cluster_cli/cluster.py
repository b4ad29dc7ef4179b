"""The resolved cluster: every Slurm node and every managed host, after cross-checks.

The inventory speaks in groups and hostlists; renderers and the Ansible inventory need the
expanded view: which host runs which slurmd on which port with which device files.
Cross-checks that need that view (unique names, references that exist, topology coverage)
live in cluster_cli/resolve/, one module per concern; ``resolve`` runs them and reports all
their problems together.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from cluster_cli import hostlist
from cluster_cli.model import Inventory, NodeGroup
from cluster_cli.resolve.clashes import check_ports, check_shared_devices
from cluster_cli.resolve.configless import check_configless
from cluster_cli.resolve.hosts import ManagedHost, declared_hosts, resolve_hosts
from cluster_cli.resolve.nodes import SlurmNode, resolve_nodes
from cluster_cli.resolve.overrides import check_overrides
from cluster_cli.resolve.partitions import resolve_partitions
from cluster_cli.resolve.problems import Problems
from cluster_cli.resolve.slurm_build import check_build
from cluster_cli.resolve.topology import check_topology
from cluster_cli.source_map import SourceMap

__all__ = ["Cluster", "ManagedHost", "SlurmNode", "resolve"]


@dataclass
class Cluster:
    """The inventory with every node and host resolved."""

    inventory: Inventory
    source_file: str
    nodes: list[SlurmNode]
    hosts: dict[str, ManagedHost]
    partition_nodes: dict[str, list[str]]
    _pieces_by_group: dict[int, hostlist.Pieces] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.inventory.cluster_name

    def node(self, name: str) -> SlurmNode:
        return next(node for node in self.nodes if node.name == name)

    def group_nodes(self, group: NodeGroup) -> list[SlurmNode]:
        """The nodes of ``group``, in node order (grouped in one pass over all nodes, not one per group)."""
        return self._nodes_by_group.get(id(group), [])

    def group_hostlist(self, group: NodeGroup) -> str:
        """The group's node names as one compressed hostlist."""
        return hostlist.join_pieces([self._group_pieces(group)]) or ""

    def partition_hostlist(self, name: str) -> str:
        """The partition's node names as one compressed hostlist: from its groups' pieces, each
        compressed once (slurm.conf's and gres.conf's NodeName lines use them too), and those of
        the names of its hostlists, compressed together, where no two of these share a prefix;
        else from its names."""
        items = self._partition_items(name)
        parts = [self._group_pieces(group) for _, group in items if group is not None]
        listed = [node for item, group in items if group is None for node in hostlist.expand(item)]
        if listed:
            parts.append(hostlist.compressed_pieces(listed))
        return hostlist.join_pieces(parts) or hostlist.compress(self.partition_nodes[name])

    def partition_groups(self, name: str) -> list[NodeGroup]:
        """The groups of the partition's nodes, each once, in the order of their first node (a group
        the partition names stands for all its nodes, without a look at each)."""
        found: dict[int, NodeGroup] = {}
        for item, group in self._partition_items(name):
            if group is not None:
                found.setdefault(id(group), group)
                continue
            for node_name in hostlist.expand(item):
                node = self._node_by_name.get(node_name)
                if node is not None:  # as resolve_partitions: only the names of nodes
                    found.setdefault(id(node.group), node.group)
        return list(found.values())

    def _partition_items(self, name: str) -> list[tuple[str, NodeGroup | None]]:
        """The partition's items as ``resolve_partitions`` reads them: each with its group, or
        None for a hostlist of nodes."""
        partition = next(partition for partition in self.inventory.partitions if partition.name == name)
        groups = {group.name: group for group in self.inventory.node_groups}
        return [(item, groups.get(item)) for item in partition.nodes]

    def _group_pieces(self, group: NodeGroup) -> hostlist.Pieces:
        pieces = self._pieces_by_group.get(id(group))
        if pieces is None:
            pieces = hostlist.compressed_pieces([node.name for node in self.group_nodes(group)])
            self._pieces_by_group[id(group)] = pieces
        return pieces

    @cached_property
    def _node_by_name(self) -> dict[str, SlurmNode]:
        return {node.name: node for node in self.nodes}

    @cached_property
    def _nodes_by_group(self) -> dict[int, list[SlurmNode]]:
        by_group: dict[int, list[SlurmNode]] = {}
        for node in self.nodes:
            by_group.setdefault(id(node.group), []).append(node)
        return by_group


def resolve(inventory: Inventory, source: SourceMap | None = None, file: str = "<inventory>") -> Cluster:
    """Cross-check the inventory and expand it; raise InventoryError with every problem."""
    problems = Problems(source or SourceMap(None), file)
    # Problems on one field are listed in the order found: keep the order of these steps.
    declared = declared_hosts(inventory.hosts, problems)
    nodes = resolve_nodes(inventory.node_groups, declared, problems)
    hosts = resolve_hosts(inventory, declared, nodes, problems)
    check_ports(inventory, hosts, problems)
    check_shared_devices(hosts, problems)
    partitions = resolve_partitions(inventory.partitions, nodes, problems)
    check_topology(inventory.topology, nodes, problems)
    check_overrides(inventory, problems)
    check_build(inventory, hosts, problems)
    check_configless(inventory, hosts, problems)
    problems.raise_if_any()
    return Cluster(inventory, file, nodes, hosts, partitions)
