"""The resolved cluster: every Slurm node and every managed host, after cross-checks.

The inventory speaks in groups and hostlists; renderers and the Ansible inventory need the
expanded view: which host runs which slurmd on which port with which device files.
Cross-checks that need that view (unique names, references that exist, topology coverage)
live here and are all reported together.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster_cli.errors import Location
from cluster_cli.model import Inventory
from cluster_cli.resolve.clashes import check_ports, check_shared_devices
from cluster_cli.resolve.hosts import ManagedHost, declared_hosts, resolve_hosts
from cluster_cli.resolve.nodes import SlurmNode, resolve_nodes
from cluster_cli.resolve.overrides import check_overrides
from cluster_cli.resolve.partitions import resolve_partitions
from cluster_cli.resolve.problems import Problems, expand
from cluster_cli.resolve.topology import check_topology
from cluster_cli.source_map import SourceMap


@dataclass
class Cluster:
    """The inventory with every node and host resolved."""

    inventory: Inventory
    source_file: str
    nodes: list[SlurmNode]
    hosts: dict[str, ManagedHost]
    partition_nodes: dict[str, list[str]]

    @property
    def name(self) -> str:
        return self.inventory.cluster_name

    def node(self, name: str) -> SlurmNode:
        return next(node for node in self.nodes if node.name == name)


class _Checker:
    def __init__(self, inventory: Inventory, problems: Problems):
        self.inventory = inventory
        self.problems = problems

    def fail(self, location: Location, message: str) -> None:
        self.problems.add(location, message)

    def expand(self, location: Location, expression: str) -> list[str]:
        return expand(self.problems, location, expression)

    def check_build(self) -> None:
        build = self.inventory.slurm.build
        if self.inventory.slurm.install == "build" and build.source == "tarball":
            if build.tarball_url is None:
                self.fail(("slurm", "build", "tarball_url"), "source: tarball needs tarball_url")
            if build.tarball_sha256 is None:
                self.fail(("slurm", "build", "tarball_sha256"), "source: tarball needs tarball_sha256")


def resolve(inventory: Inventory, source: SourceMap | None = None, file: str = "<inventory>") -> Cluster:
    """Cross-check the inventory and expand it; raise InventoryError with every problem."""
    problems = Problems(source or SourceMap(None), file)
    checker = _Checker(inventory, problems)
    declared = declared_hosts(inventory.hosts, problems)
    nodes = resolve_nodes(inventory.node_groups, declared, problems)
    hosts = resolve_hosts(inventory, declared, nodes, problems)
    check_ports(inventory, hosts, problems)
    check_shared_devices(hosts, problems)
    partitions = resolve_partitions(inventory.partitions, nodes, problems)
    check_topology(inventory.topology, nodes, problems)
    check_overrides(inventory, problems)
    checker.check_build()
    problems.raise_if_any()
    return Cluster(inventory, file, nodes, hosts, partitions)
