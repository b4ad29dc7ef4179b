"""What two daemons on one host may not share: a port, or a GPU device file."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cluster_cli.errors import Location
from cluster_cli.model import Inventory
from cluster_cli.resolve.hosts import ManagedHost
from cluster_cli.resolve.problems import Problems
from cluster_cli.shared_storage import SERVER_PORT, SERVER_PROGRAM

MARIADB_PORT = 3306
# Where a probe on the host itself reaches a daemon that listens on every address (Slurm's) or on
# 127.0.0.1 only (MariaDB's).
LOOPBACK = "127.0.0.1"
# The Python exporters run as `python -m MODULE` (roles/slurm_exporter, roles/gpu_exporter): the
# probe finds them by their module, not by a program of their daemon's name.
SLURM_EXPORTER_MODULE = "cluster_cli.exporters.slurm_metrics"
GPU_EXPORTER_MODULE = "cluster_cli.exporters.gpu_metrics"



@dataclass(frozen=True)
class DaemonPort:
    """A daemon of a host and the TCP port it listens on."""

    daemon: str
    """As the probe names it: slurmctld, slurmdbd, mariadbd, slurmd@NODE, prometheus, ..."""
    label: str
    """As a message names it: "slurmd of NODE", "MariaDB"."""
    port: int
    where: Location
    """The inventory field that sets the port (where a clash is reported)."""
    address: str = LOOPBACK
    """Where a probe on the host connects: the monitoring daemons listen on the host's inventory
    address only."""
    program: str = ""
    """What runs it, where that is not a program named like the daemon: a Python module."""


def check_ports(inventory: Inventory, hosts: dict[str, ManagedHost], problems: Problems) -> None:
    """No two daemons of one host listen on one port; a clash is reported at the later claim."""
    group_index = {id(group): index for index, group in enumerate(inventory.node_groups)}
    monitored = inventory.monitoring.host is not None
    for host in hosts.values():
        storage = storage_ports(inventory, host)
        if len(host.slurmd_nodes) < 2 and not {"controller", "database"} & host.roles and not monitored and not storage:
            continue  # one port and one node at most: nothing can clash
        users: dict[int, str] = {}
        for claim in daemon_ports(inventory, host, group_index) + monitoring_ports(inventory, host) + storage:
            if claim.port in users:
                message = f"port {claim.port} on host '{host.name}' is used by both {users[claim.port]} and {claim.label}"
                problems.add(claim.where, message)
            else:
                users[claim.port] = claim.label


def daemon_ports(inventory: Inventory, host: ManagedHost, group_index: dict[int, int] | None = None) -> list[DaemonPort]:
    """Every daemon ``host`` runs and its port, in the order a clash is reported."""
    if group_index is None:
        group_index = {id(group): index for index, group in enumerate(inventory.node_groups)}
    claims: list[DaemonPort] = []
    if "controller" in host.roles:
        claims.append(DaemonPort("slurmctld", "slurmctld", inventory.controllers.port, ("controllers", "port")))
    if "database" in host.roles:
        claims += [
            DaemonPort("slurmdbd", "slurmdbd", inventory.accounting.port, ("accounting", "port")),
            DaemonPort("mariadbd", "MariaDB", MARIADB_PORT, ("accounting", "port")),
        ]
    for node in host.slurmd_nodes:
        where: Location = ("node_groups", group_index[id(node.group)])
        if node.single_host:
            where += ("base_port",)
        port = node.port or inventory.slurm.slurmd_port
        claims.append(DaemonPort(f"slurmd@{node.name}", f"slurmd of {node.name}", port, where))
    return claims


def monitoring_ports(inventory: Inventory, host: ManagedHost) -> list[DaemonPort]:
    """The monitoring daemons ``host`` runs and their ports (none without monitoring): node_exporter
    on every host, the Slurm exporter on the primary controller, the GPU exporter where NVML reads
    the GPUs, Prometheus (and Alertmanager) on the monitoring host."""
    monitoring = inventory.monitoring
    if monitoring.host is None:
        return []
    ports, address = monitoring.ports, host.address
    claims = [DaemonPort("prometheus-node-exporter", "node_exporter", ports.node, ("monitoring", "ports", "node"), address)]
    if host.name == inventory.controllers.primary:
        claims.append(DaemonPort("cluster-slurm-exporter", "the Slurm exporter", ports.slurm, ("monitoring", "ports", "slurm"),
                                 address, SLURM_EXPORTER_MODULE))
    if host.has_nvml_gpus:
        claims.append(DaemonPort("cluster-gpu-exporter", "the GPU exporter", ports.gpu, ("monitoring", "ports", "gpu"),
                                 address, GPU_EXPORTER_MODULE))
    if "monitoring" in host.roles:
        claims.append(DaemonPort("prometheus", "Prometheus", ports.prometheus, ("monitoring", "ports", "prometheus"), address))
        if monitoring.alertmanager:
            claims.append(DaemonPort("prometheus-alertmanager", "Alertmanager", ports.alertmanager,
                                     ("monitoring", "ports", "alertmanager"), address))
    return claims


def host_daemons(inventory: Inventory, host: ManagedHost) -> list[DaemonPort]:
    """Every daemon ``host`` runs with a port: Slurm's, MariaDB, the monitoring daemons and the NFS server."""
    return daemon_ports(inventory, host) + monitoring_ports(inventory, host) + storage_ports(inventory, host)


def storage_ports(inventory: Inventory, host: ManagedHost) -> list[DaemonPort]:
    """The NFS server, on the host of storage.nfs_server (roles/nfs_server); none elsewhere."""
    server = inventory.storage.nfs_server if inventory.storage is not None else None
    if server is None or server.host != host.name:
        return []
    return [DaemonPort("nfs-server", "the NFS server", SERVER_PORT, ("storage", "nfs_server", "host"),
                       program=SERVER_PROGRAM)]


def check_shared_devices(hosts: dict[str, ManagedHost], problems: Problems) -> None:
    """No GPU device file of a host belongs to two of its nodes."""
    for host in hosts.values():
        if len(host.slurmd_nodes) < 2:
            continue  # a node's own device files never repeat (gpus.py refuses that)
        devices = Counter(device for node in host.slurmd_nodes for device in node.gpu_devices)
        repeated = sorted(device for device, count in devices.items() if count > 1)
        if repeated:
            problems.add(("node_groups",), f"device {repeated[0]} on host '{host.name}' belongs to two nodes")
