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
from cluster_cli.resolve.partitions import resolve_partitions
from cluster_cli.resolve.problems import Problems, expand
from cluster_cli.resolve.topology import check_topology
from cluster_cli.source_map import SourceMap

# slurm.conf keys the inventory sets from its own fields; overriding them would let the two disagree.
MANAGED_SLURM_KEYS = {
    "AccountingStorageHost": "accounting.host",
    "AccountingStoragePort": "accounting.port",
    "BackupController": "controllers.backup",
    "ClusterName": "cluster_name",
    "ControlMachine": "controllers.primary",
    "NodeName": "node_groups",
    "PartitionName": "partitions",
    "SlurmUser": "slurm.user",
    "SlurmctldHost": "controllers.primary / controllers.backup",
    "SlurmctldLogFile": "slurm.paths.log_dir",
    "SlurmctldPidFile": "slurm.paths.run_dir",
    "SlurmctldPort": "controllers.port",
    "SlurmdLogFile": "slurm.paths.log_dir",
    "SlurmdPidFile": "slurm.paths.run_dir",
    "SlurmdPort": "slurm.slurmd_port",
    "SlurmdSpoolDir": "slurm.paths.spool_dir",
    # the roles create these directories, so they must come from slurm.paths
    "StateSaveLocation": "slurm.paths.state_dir",
    "TopologyPlugin": "topology.plugin",
}
MANAGED_PARTITION_KEYS = {
    "Default": "default",
    "DefaultTime": "default_time",
    "MaxTime": "max_time",
    "Nodes": "nodes",
    "OverSubscribe": "oversubscribe",
    "PartitionName": "name",
    "QOS": "qos",
}


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


def _lookup(table: dict[str, str], key: str) -> str | None:
    """``table[key]`` compared without case, as Slurm compares configuration keys."""
    lowered = key.lower()
    return next((value for name, value in table.items() if name.lower() == lowered), None)


class _Checker:
    def __init__(self, inventory: Inventory, problems: Problems):
        self.inventory = inventory
        self.problems = problems

    def fail(self, location: Location, message: str) -> None:
        self.problems.add(location, message)

    def expand(self, location: Location, expression: str) -> list[str]:
        return expand(self.problems, location, expression)

    def check_partition_options(self) -> None:
        for index, partition in enumerate(self.inventory.partitions):
            for key in partition.options:
                managed_field = _lookup(MANAGED_PARTITION_KEYS, key)
                if managed_field is not None:
                    self.fail(("partitions", index, "options", key), f"set it with the field '{managed_field}'")

    def check_build(self) -> None:
        build = self.inventory.slurm.build
        if self.inventory.slurm.install == "build" and build.source == "tarball":
            if build.tarball_url is None:
                self.fail(("slurm", "build", "tarball_url"), "source: tarball needs tarball_url")
            if build.tarball_sha256 is None:
                self.fail(("slurm", "build", "tarball_sha256"), "source: tarball needs tarball_sha256")

    def check_case_repeats(self, location: Location, settings: dict[str, object]) -> None:
        first: dict[str, str] = {}
        for key in settings:
            if key.lower() in first:
                self.fail(location + (key,), f"the same key as '{first[key.lower()]}': Slurm ignores case in keys")
            first.setdefault(key.lower(), key)

    def check_overrides(self) -> None:
        # Slurm reads its keys case-insensitively: `clustername` is ClusterName
        self.check_case_repeats(("slurm", "conf"), self.inventory.slurm.conf)
        self.check_case_repeats(("cgroup", "overrides"), self.inventory.cgroup.overrides)
        for index, partition in enumerate(self.inventory.partitions):
            self.check_case_repeats(("partitions", index, "options"), partition.options)
        for key in self.inventory.slurm.conf:
            managed_field = _lookup(MANAGED_SLURM_KEYS, key)
            if managed_field is not None:
                self.fail(("slurm", "conf", key), f"set by the inventory: use {managed_field}")
        for key in self.inventory.cgroup.overrides:
            if key.lower() == "cgroupplugin":
                self.fail(("cgroup", "overrides", key), "set by the inventory: use cgroup.version")


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
    checker.check_partition_options()
    check_topology(inventory.topology, nodes, problems)
    checker.check_overrides()
    checker.check_build()
    problems.raise_if_any()
    return Cluster(inventory, file, nodes, hosts, partitions)
