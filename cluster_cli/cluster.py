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
from cluster_cli.mpi_launch import mpi_packages
from cluster_cli.resolve.accounting import check_accounting
from cluster_cli.resolve.clashes import check_ports, check_shared_devices
from cluster_cli.resolve.configless import check_configless
from cluster_cli.resolve.hosts import ManagedHost, declared_hosts, resolve_hosts
from cluster_cli.resolve.nodes import SlurmNode, resolve_nodes
from cluster_cli.resolve.overrides import check_overrides
from cluster_cli.resolve.partitions import PartitionNodes, resolve_partitions
from cluster_cli.resolve.people import check_people
from cluster_cli.resolve.alert_receivers import check_alert_receivers
from cluster_cli.resolve.directory import check_directory
from cluster_cli.resolve.storage import check_storage
from cluster_cli.shared_storage import with_exported_mounts, with_shared_work_dir
from cluster_cli.resolve.problems import Problems
from cluster_cli.resolve.series_values import check_series_values
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
    partitions: dict[str, PartitionNodes]
    _pieces_by_group: dict[int, hostlist.Pieces] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.inventory.cluster_name

    @cached_property
    def default_partition(self) -> str:
        """The partition marked default, else the first (Slurm's own choice without a default)."""
        partitions = self.inventory.partitions
        return next((partition.name for partition in partitions if partition.default), partitions[0].name)

    @cached_property
    def partition_nodes(self) -> dict[str, list[str]]:
        """Each partition's node names, in the order given, without repeats."""
        return {name: members.names for name, members in self.partitions.items()}

    @cached_property
    def mpi_packages(self) -> list[str]:
        """mpi_launch.mpi_packages, decided once: plan and probe ask for every host (its default
        expands the GPU groups' hostlists)."""
        return mpi_packages(self.inventory)

    def node(self, name: str) -> SlurmNode:
        """The node of that name; KeyError for a name that is not a node's. A lookup, not a
        search: `smoke` asks for every node of every partition (5 s for 10,000 nodes by search)."""
        return self._node_by_name[name]

    def group_nodes(self, group: NodeGroup) -> list[SlurmNode]:
        """The nodes of ``group``, in node order (grouped in one pass over all nodes, not one per group)."""
        return self._nodes_by_group.get(id(group), [])

    def group_hostlist(self, group: NodeGroup) -> str:
        """The group's node names as one compressed hostlist."""
        return hostlist.joined(self._group_pieces(group))

    def partition_hostlist(self, name: str) -> str:
        """The partition's node names as one compressed hostlist: from the pieces of the groups it
        names, each compressed once (slurm.conf's and gres.conf's NodeName lines use them too), and
        those of the nodes its hostlists name, compressed together, where no two of these share a
        prefix; else from its names."""
        members = self.partitions[name]
        parts = [self._group_pieces(group) for group in members.named_groups]
        if members.listed:
            parts.append(hostlist.compressed_pieces(members.listed))
        return hostlist.join_pieces(parts) or hostlist.compress(members.names)

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
    check_series_values(inventory, problems)
    check_build(inventory, hosts, problems)
    check_configless(inventory, hosts, problems)
    check_accounting(inventory, problems)
    check_people(inventory, problems)
    check_directory(inventory, problems)
    check_alert_receivers(inventory, problems)
    check_storage(inventory, hosts, problems)
    problems.raise_if_any()
    # the NFS server's exports mounted on the clients: storage.mounts from here on; the smoke jobs'
    # work directory in its work area unless the inventory places it
    resolved = with_shared_work_dir(with_exported_mounts(inventory, hosts))
    return Cluster(resolved, file, nodes, hosts, partitions)
