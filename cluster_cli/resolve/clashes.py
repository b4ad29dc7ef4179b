"""What two daemons on one host may not share: a port, or a GPU device file."""

from __future__ import annotations

from collections import Counter

from cluster_cli.errors import Location
from cluster_cli.model import Inventory
from cluster_cli.resolve.hosts import ManagedHost
from cluster_cli.resolve.problems import Problems

MARIADB_PORT = 3306

# A port, who listens on it, and the field that sets it (where a clash is reported).
PortClaim = tuple[int, str, Location]


def check_ports(inventory: Inventory, hosts: dict[str, ManagedHost], problems: Problems) -> None:
    """No two daemons of one host listen on one port; a clash is reported at the later claim."""
    group_index = {id(group): index for index, group in enumerate(inventory.node_groups)}
    for host in hosts.values():
        if len(host.slurmd_nodes) < 2 and not {"controller", "database"} & host.roles:
            continue  # one port and one node at most: nothing can clash
        users: dict[int, str] = {}
        for port, user, location in _port_claims(inventory, host, group_index):
            if port in users:
                message = f"port {port} on host '{host.name}' is used by both {users[port]} and {user}"
                problems.add(location, message)
            else:
                users[port] = user


def _port_claims(inventory: Inventory, host: ManagedHost, group_index: dict[int, int]) -> list[PortClaim]:
    claims: list[PortClaim] = []
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
    return claims


def check_shared_devices(hosts: dict[str, ManagedHost], problems: Problems) -> None:
    """No GPU device file of a host belongs to two of its nodes."""
    for host in hosts.values():
        if len(host.slurmd_nodes) < 2:
            continue  # a node's own device files never repeat (gpus.py refuses that)
        devices = Counter(device for node in host.slurmd_nodes for device in node.gpu_devices)
        repeated = sorted(device for device, count in devices.items() if count > 1)
        if repeated:
            problems.add(("node_groups",), f"device {repeated[0]} on host '{host.name}' belongs to two nodes")
