"""The resolved cluster: every Slurm node and every managed host, after cross-checks.

The inventory speaks in groups and hostlists; renderers and the Ansible inventory need the
expanded view: which host runs which slurmd on which port with which device files.
Cross-checks that need that view (unique names, references that exist, topology coverage)
live here and are all reported together.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from cluster_cli import hostlist
from cluster_cli.errors import Location, format_location
from cluster_cli.model import Host, Inventory, SshSettings
from cluster_cli.resolve.nodes import SlurmNode, resolve_nodes
from cluster_cli.resolve.problems import Problems, expand
from cluster_cli.source_map import SourceMap

MARIADB_PORT = 3306

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
class ManagedHost:
    """A machine Ansible configures."""

    name: str
    address: str
    connection: str
    ssh: SshSettings
    python: str
    roles: set[str] = field(default_factory=set)
    slurmd_nodes: list[SlurmNode] = field(default_factory=list)


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

    # -- hosts ---------------------------------------------------------------------------------
    def declared_hosts(self) -> dict[str, Host]:
        declared: dict[str, Host] = {}
        for index, host in enumerate(self.inventory.hosts):
            if host.name in declared:
                self.fail(("hosts", index, "name"), f"host '{host.name}' is declared twice")
            declared[host.name] = host
        return declared

    # -- hosts and roles -------------------------------------------------------------------------
    def resolve_hosts(self, declared: dict[str, Host], nodes: list[SlurmNode]) -> dict[str, ManagedHost]:
        inventory = self.inventory
        hosts: dict[str, ManagedHost] = {}
        compute_nodes = {node.name: node for node in nodes if not node.single_host}

        def managed(name: str) -> ManagedHost:
            if name not in hosts:
                entry = declared.get(name)
                node = compute_nodes.get(name)
                address = (entry.address if entry and entry.address else None) or (node.address if node else name)
                hosts[name] = ManagedHost(
                    name=name,
                    address=address,
                    connection=entry.connection if entry else "ssh",
                    ssh=(entry.ssh if entry and entry.ssh else inventory.ssh),
                    python=entry.python if entry else "/usr/bin/python3",
                )
            return hosts[name]

        def require(location: Location, name: str | None, role: str) -> None:
            if name is None:
                return
            if name not in declared and name not in compute_nodes:
                self.fail(location, f"host '{name}' is neither declared under hosts nor a compute node")
                return
            managed(name).roles.add(role)

        require(("controllers", "primary"), inventory.controllers.primary, "controller")
        if inventory.controllers.backup is not None:
            if inventory.controllers.backup == inventory.controllers.primary:
                self.fail(("controllers", "backup"), "the backup controller must differ from the primary")
            require(("controllers", "backup"), inventory.controllers.backup, "controller")
        accounting = inventory.accounting
        if accounting.enabled:
            if accounting.host is None:
                self.fail(("accounting", "host"), "accounting is enabled: name the database host")
            require(("accounting", "host"), accounting.host, "database")
        for index, name in enumerate(inventory.login):
            if inventory.login.index(name) != index:
                self.fail(("login", index), f"login host '{name}' is listed twice")
            require(("login", index), name, "login")
        for node in nodes:
            host = managed(node.host)
            host.roles.add("compute")
            host.slurmd_nodes.append(node)
        for index, declared_host in enumerate(inventory.hosts):
            if declared_host.name not in hosts:
                self.fail(
                    ("hosts", index, "name"),
                    f"host '{declared_host.name}' has no role (controller, database, login, nodes)",
                )
        self.check_ports(hosts)
        return hosts

    def check_ports(self, hosts: dict[str, ManagedHost]) -> None:
        inventory = self.inventory
        group_index = {id(group): index for index, group in enumerate(inventory.node_groups)}
        for host in hosts.values():
            if len(host.slurmd_nodes) < 2 and not {"controller", "database"} & host.roles:
                continue  # one port and one node at most: nothing can clash
            users: dict[int, str] = {}
            # each claim names the field that sets its port; a clash is reported at the later claim
            claims: list[tuple[int, str, Location]] = []
            if "controller" in host.roles:
                claims.append((inventory.controllers.port, "slurmctld", ("controllers", "port")))
            if "database" in host.roles:
                claims += [
                    (inventory.accounting.port, "slurmdbd", ("accounting", "port")),
                    (MARIADB_PORT, "MariaDB", ("accounting", "port")),
                ]
            for node in host.slurmd_nodes:
                where: Location = ("node_groups", group_index[id(node.group)])
                if node.single_host:
                    where += ("base_port",)
                claims.append((node.port or inventory.slurm.slurmd_port, f"slurmd of {node.name}", where))
            for port, user, location in claims:
                if port in users:
                    self.fail(location, f"port {port} on host '{host.name}' is used by both {users[port]} and {user}")
                else:
                    users[port] = user
            devices = Counter(device for node in host.slurmd_nodes for device in node.gpu_devices)
            repeated = sorted(device for device, count in devices.items() if count > 1)
            if repeated:
                self.fail(("node_groups",), f"device {repeated[0]} on host '{host.name}' belongs to two nodes")

    # -- partitions ----------------------------------------------------------------------------
    def resolve_partitions(self, nodes: list[SlurmNode]) -> dict[str, list[str]]:
        by_group: dict[str, list[str]] = defaultdict(list)
        for node in nodes:
            by_group[node.group.name].append(node.name)
        known = {node.name for node in nodes}
        result: dict[str, list[str]] = {}
        used: set[str] = set()
        defaults = [p.name for p in self.inventory.partitions if p.default]
        if len(defaults) > 1:
            self.fail(("partitions",), f"only one partition can be the default, not {', '.join(defaults)}")
        for index, partition in enumerate(self.inventory.partitions):
            where: Location = ("partitions", index)
            if partition.name in result:
                self.fail(where + ("name",), f"partition '{partition.name}' is declared twice")
            members: list[str] = []
            for item_index, item in enumerate(partition.nodes):
                if item in by_group:
                    members.extend(by_group[item])
                    continue
                expanded = self.expand(where + ("nodes", item_index), item)
                missing = [name for name in expanded if name not in known]
                if missing:
                    self.fail(where + ("nodes", item_index), f"'{missing[0]}' is neither a node group nor a node")
                members.extend(name for name in expanded if name in known)
            for key in partition.options:
                managed_field = _lookup(MANAGED_PARTITION_KEYS, key)
                if managed_field is not None:
                    self.fail(where + ("options", key), f"set it with the field '{managed_field}'")
            result[partition.name] = list(dict.fromkeys(members))
            used.update(members)
        unplaced = [node.name for node in nodes if node.name not in used]
        if unplaced:
            self.fail(("partitions",), f"nodes in no partition: {hostlist.compress(unplaced)}")
        return result

    # -- topology ------------------------------------------------------------------------------
    def check_topology(self, nodes: list[SlurmNode]) -> None:
        topology = self.inventory.topology
        if topology is None:
            return
        known = [node.name for node in nodes]
        known_set = set(known)
        covered: Counter[str] = Counter()
        if topology.plugin == "tree":
            if topology.blocks or topology.block_sizes:
                self.fail(("topology", "blocks"), "blocks belong to plugin: block")
            if not topology.switches:
                self.fail(("topology", "switches"), "a tree topology needs switches")
            names = [switch.name for switch in topology.switches]
            children: dict[str, list[str]] = {}
            for index, switch in enumerate(topology.switches):
                where: Location = ("topology", "switches", index)
                if names.count(switch.name) > 1 and names.index(switch.name) != index:
                    self.fail(where + ("name",), f"switch '{switch.name}' is declared twice")
                if (switch.nodes is None) == (switch.switches is None):
                    self.fail(where, "a switch has either nodes (leaf) or switches (parent), not both or neither")
                    continue
                if switch.nodes is not None:
                    self.count_members(where + ("nodes",), switch.nodes, known_set, covered)
                else:
                    kids = self.expand(where + ("switches",), str(switch.switches))
                    for kid in kids:
                        if kid not in names:
                            self.fail(where + ("switches",), f"switch '{kid}' is not declared")
                    children[switch.name] = kids
            self.check_cycles(children)
        else:
            if topology.switches:
                self.fail(("topology", "switches"), "switches belong to plugin: tree")
            if not topology.blocks:
                self.fail(("topology", "blocks"), "a block topology needs blocks")
            for index, block in enumerate(topology.blocks):
                self.count_members(("topology", "blocks", index, "nodes"), block.nodes, known_set, covered)
        missing = [name for name in known if covered[name] == 0]
        twice = [name for name in known if covered[name] > 1]
        if missing:
            self.fail(("topology",), f"nodes on no switch/block: {hostlist.compress(missing)}")
        if twice:
            self.fail(("topology",), f"nodes on more than one switch/block: {hostlist.compress(twice)}")

    def count_members(self, location: Location, expression: str, known: set[str], covered: Counter[str]) -> None:
        for name in self.expand(location, expression):
            if name not in known:
                self.fail(location, f"'{name}' is not a node")
                return
            covered[name] += 1

    def check_cycles(self, children: dict[str, list[str]]) -> None:
        state: dict[str, int] = {}

        def visit(name: str, trail: list[str]) -> bool:
            if state.get(name) == 1:
                self.fail(("topology", "switches"), f"switch loop: {' -> '.join(trail + [name])}")
                return False
            if state.get(name) == 2:
                return True
            state[name] = 1
            ok = all(visit(kid, trail + [name]) for kid in children.get(name, []))
            state[name] = 2
            return ok

        for name in children:
            if not visit(name, []):
                return

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
    declared = checker.declared_hosts()
    nodes = resolve_nodes(inventory.node_groups, declared, problems)
    hosts = checker.resolve_hosts(declared, nodes)
    partitions = checker.resolve_partitions(nodes)
    checker.check_topology(nodes)
    checker.check_overrides()
    checker.check_build()
    problems.raise_if_any()
    return Cluster(inventory, file, nodes, hosts, partitions)
