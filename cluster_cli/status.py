"""cluster-cli status: controller, nodes and accounting, asked of the cluster itself, and every
daemon's process and port, asked of its host (slurmctld notices a dead slurmd only after
SlurmdTimeout; the host knows at once)."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cluster_cli.ansible.runner import run_ad_hoc
from cluster_cli.cluster import Cluster
from cluster_cli.probe import HostProbe, probe_daemons
from cluster_cli.render.ansible_inventory import render_ansible_inventory
from cluster_cli.resolve.clashes import daemon_ports
from cluster_cli.smoke.node_states import is_usable
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
    """slurmctld, slurmdbd, mariadbd or slurmd@NODE."""
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


class HostCommand:
    """Runs a command on a cluster host: directly when it is this machine, else through Ansible."""

    def __init__(self, cluster: Cluster, workdir: Path):
        self.cluster = cluster
        self.inventory_file = workdir / "inventory.yml"
        self.inventory_file.write_text(render_ansible_inventory(cluster), encoding="utf-8")

    def run(self, host: str, argv: list[str], timeout_s: float = 30) -> tuple[int, str]:
        managed = self.cluster.hosts[host]
        if managed.connection == "local":
            try:
                completed = subprocess.run(
                    argv, capture_output=True, text=True, timeout=timeout_s, check=False
                )
            except FileNotFoundError:
                return 127, f"{argv[0]}: not installed"
            except subprocess.TimeoutExpired:
                return 124, f"timed out after {timeout_s:.0f} s"
            return completed.returncode, (completed.stdout + completed.stderr).strip()
        return run_ad_hoc(self.inventory_file, host, argv, timeout_s)


def daemon_statuses(cluster: Cluster, probes: dict[str, HostProbe]) -> list[DaemonStatus]:
    """Each daemon a host should run, from what the host answered."""
    statuses = []
    for name, host in cluster.hosts.items():
        probe = probes[name]
        if probe.error:
            statuses.append(DaemonStatus(name, "(host)", False, None, False, f"not reachable: {probe.error}"))
            continue
        for claim in daemon_ports(cluster.inventory, host):
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
