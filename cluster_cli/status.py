"""cluster-cli status: controller, nodes and accounting, asked of the cluster itself, and every
daemon's process and port, asked of its host (slurmctld notices a dead slurmd only after
SlurmdTimeout; the host knows at once)."""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cluster_cli.cluster import Cluster
from cluster_cli.host_command import HostCommand
from cluster_cli.probe import HostProbe, probe_daemons
from cluster_cli.resolve.clashes import host_daemons
from cluster_cli.node_states import is_usable
from cluster_cli.stranded import ask_controller


@dataclass
class NodeStatus:
    name: str
    state: str
    reason: str
    gres: str


@dataclass
class DaemonStatus:
    host: str
    daemon: str
    """slurmctld, slurmdbd, mariadbd, slurmd@NODE or a monitoring daemon (prometheus, ...)."""
    running: bool
    port: int | None
    listening: bool
    problem: str = ""
    """Empty when it runs and listens; else what is wrong, or why the host could not be asked."""

    @property
    def healthy(self) -> bool:
        return not self.problem


@dataclass
class ClusterStatus:
    cluster: str
    controller_host: str
    controller_up: bool
    controller_message: str
    nodes: list[NodeStatus] = field(default_factory=list)
    missing_nodes: list[str] = field(default_factory=list)
    accounting_enabled: bool = False
    accounting_up: bool | None = None
    accounting_message: str = ""
    daemons: list[DaemonStatus] = field(default_factory=list)
    # nodes allocated with no job on them (stranded.py): each with its evidence
    stranded: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        nodes_ok = all(is_usable(node.state) for node in self.nodes) and not self.missing_nodes and not self.stranded
        accounting_ok = self.accounting_up is not False
        daemons_ok = all(daemon.healthy for daemon in self.daemons)
        return self.controller_up and nodes_ok and accounting_ok and daemons_ok

    @property
    def failed_daemons(self) -> list[DaemonStatus]:
        return [daemon for daemon in self.daemons if not daemon.healthy]

    def to_json(self) -> dict[str, object]:
        document = asdict(self)
        document["healthy"] = self.healthy
        return document


def daemon_statuses(cluster: Cluster, probes: dict[str, HostProbe]) -> list[DaemonStatus]:
    """Each daemon a host should run, from what the host answered."""
    statuses = []
    for name, host in cluster.hosts.items():
        probe = probes[name]
        if probe.error:
            statuses.append(DaemonStatus(name, "(host)", False, None, False, f"not reachable: {probe.error}"))
            continue
        for claim in host_daemons(cluster.inventory, host):
            running = bool(probe.daemons.get(claim.daemon, {}).get("running"))
            listening = probe.ports.get(claim.daemon, False)
            problem = ("" if running and listening else "not running" if not running
                       else f"running, but nothing accepts connections on port {claim.port}")
            statuses.append(DaemonStatus(name, claim.daemon, running, claim.port, listening, problem))
    return statuses


def collect_status(cluster: Cluster) -> ClusterStatus:
    controller = cluster.inventory.controllers.primary
    with tempfile.TemporaryDirectory(prefix="cluster-cli-status-") as workdir:
        runner = HostCommand(cluster, Path(workdir))
        code, output = runner.run(controller, ["scontrol", "ping"])
        status = ClusterStatus(cluster.name, controller, code == 0 and "UP" in output, output.splitlines()[0] if output else "")
        code, output = runner.run(controller, ["sinfo", "--noheader", "--Node", "--format=%N|%T|%E|%G"])
        seen: dict[str, NodeStatus] = {}
        if code == 0:
            for line in output.splitlines():
                parts = line.split("|")
                if len(parts) == 4:
                    # The state keeps its flags: `idle*` (not responding) is not healthy.
                    node = NodeStatus(parts[0], parts[1].lower(), parts[2], parts[3])
                    seen.setdefault(node.name, node)
        status.nodes = list(seen.values())
        status.missing_nodes = [node.name for node in cluster.nodes if node.name not in seen]
        status.stranded = [node.evidence for node in ask_controller(lambda argv: runner.run(controller, argv))]
        accounting = cluster.inventory.accounting
        status.accounting_enabled = accounting.enabled
        if accounting.enabled:
            code, output = runner.run(controller, ["sacctmgr", "--noheader", "--parsable2", "list", "cluster", "format=Cluster"])
            status.accounting_up = code == 0 and cluster.name in output.split()
            status.accounting_message = (
                f"cluster '{cluster.name}' registered" if status.accounting_up else (output.splitlines() or ["no answer"])[-1]
            )
    status.daemons = daemon_statuses(cluster, probe_daemons(cluster))
    return status
