"""Managed hosts: the machines Ansible configures, and the roles (services) each one runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from cluster_cli.errors import Location
from cluster_cli.model import Host, Inventory, SshSettings
from cluster_cli.resolve.nodes import SlurmNode
from cluster_cli.resolve.problems import Problems


@dataclass(slots=True)
class ManagedHost:
    """A machine Ansible configures."""

    name: str
    address: str
    connection: str
    ssh: SshSettings
    python: str
    roles: frozenset[str] = frozenset()  # hosts of the same roles share one (10,000 compute hosts)
    slurmd_nodes: list[SlurmNode] = field(default_factory=list)

    @property
    def has_nvml_gpus(self) -> bool:
        """A node here has GPUs NVML reads: not test-only fake device files, which no NVML knows."""
        return any(node.group.gpus is not None and not node.group.gpus.fake for node in self.slurmd_nodes)


_COMPUTE = frozenset({"compute"})


def declared_hosts(hosts: list[Host], problems: Problems) -> dict[str, Host]:
    """The entries under ``hosts`` by name; the last one where a name is declared twice."""
    declared: dict[str, Host] = {}
    for index, host in enumerate(hosts):
        if host.name in declared:
            problems.add(("hosts", index, "name"), f"host '{host.name}' is declared twice")
        declared[host.name] = host
    return declared


def resolve_hosts(
    inventory: Inventory, declared: dict[str, Host], nodes: list[SlurmNode], problems: Problems
) -> dict[str, ManagedHost]:
    """Every host that runs something, in the order it was first given a role."""
    hosts = _HostTable(inventory.ssh, declared, nodes)
    _assign_service_roles(inventory, hosts, problems)
    for node in nodes:
        hosts.add_node(node)
    for index, declared_host in enumerate(inventory.hosts):
        if declared_host.name not in hosts.by_name:
            problems.add(
                ("hosts", index, "name"),
                f"host '{declared_host.name}' has no role (controller, database, login, monitoring, nodes)",
            )
    return hosts.by_name


class _HostTable:
    """Managed hosts by name, each made the first time it is named from its entry under ``hosts``."""

    def __init__(self, default_ssh: SshSettings, declared: dict[str, Host], nodes: list[SlurmNode]):
        self.default_ssh = default_ssh
        self.declared = declared
        self.compute_nodes = {node.name: node for node in nodes if not node.single_host}
        self.by_name: dict[str, ManagedHost] = {}

    def managed(self, name: str) -> ManagedHost:
        host = self.by_name.get(name)
        if host is None:
            host = self.by_name[name] = self._new(name, frozenset(), [])
        return host

    def add_node(self, node: SlurmNode) -> None:
        """``node``'s host runs it: a compute host (made here for most nodes, 10,000 at a time)."""
        host = self.by_name.get(node.host)
        if host is None:
            self.by_name[node.host] = self._new(node.host, _COMPUTE, [node])
        else:
            host.roles |= _COMPUTE
            host.slurmd_nodes.append(node)

    def _new(self, name: str, roles: frozenset[str], nodes: list[SlurmNode]) -> ManagedHost:
        entry = self.declared.get(name)
        node = self.compute_nodes.get(name)
        address = (entry.address if entry and entry.address else None) or (node.address if node else name)
        connection = entry.connection if entry else "ssh"
        ssh = entry.ssh if entry and entry.ssh else self.default_ssh
        python = entry.python if entry else "/usr/bin/python3"
        return ManagedHost(name, address, connection, ssh, python, roles, nodes)  # positional: twice as fast

    def give_role(self, location: Location, name: str | None, role: str, problems: Problems) -> None:
        """``name`` runs ``role``; it must be a declared host or a compute node."""
        if name is None:
            return
        if name not in self.declared and name not in self.compute_nodes:
            problems.add(location, f"host '{name}' is neither declared under hosts nor a compute node")
            return
        host = self.managed(name)
        host.roles |= {role}


def _assign_service_roles(inventory: Inventory, hosts: _HostTable, problems: Problems) -> None:
    """The controllers, the accounting database, the login hosts and the monitoring host."""
    controllers = inventory.controllers
    hosts.give_role(("controllers", "primary"), controllers.primary, "controller", problems)
    if controllers.backup is not None:
        if controllers.backup == controllers.primary:
            problems.add(("controllers", "backup"), "the backup controller must differ from the primary")
        hosts.give_role(("controllers", "backup"), controllers.backup, "controller", problems)
    accounting = inventory.accounting
    if accounting.enabled:
        if accounting.host is None:
            problems.add(("accounting", "host"), "accounting is enabled: name the database host")
        hosts.give_role(("accounting", "host"), accounting.host, "database", problems)
    for index, name in enumerate(inventory.login):
        if inventory.login.index(name) != index:
            problems.add(("login", index), f"login host '{name}' is listed twice")
        hosts.give_role(("login", index), name, "login", problems)
    hosts.give_role(("monitoring", "host"), inventory.monitoring.host, "monitoring", problems)
