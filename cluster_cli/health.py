"""cluster-cli health: run the node health check on every compute host now, one verdict per node.

It runs the checker the slurmd role installed (render/health_conf.HEALTH_PROGRAM_PATH, slurm.conf's
HealthCheckProgram) with ``--all --json`` on each host that runs slurmd (here when its connection
is local, else through Ansible), so the verdict is the very one slurmd would get at its next
HealthCheckInterval. By default it also acts as that run would: a failing node is drained with a
``cluster-cli health:`` reason, a node the check drained is resumed once it passes, and a drain
with any other reason is left alone; ``act=False`` only reports.
"""

from __future__ import annotations

import json
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cluster_cli.cluster import Cluster, ManagedHost
from cluster_cli.errors import RefusedError
from cluster_cli.host_command import HostCommand
from cluster_cli.render.health_conf import HEALTH_PROGRAM_PATH
from cluster_cli.stranded import ask_controller

# The checker gives each command 15 s; a host runs a few per node.
HOST_TIMEOUT_S = 120
PARALLEL_HOSTS = 16


@dataclass
class NodeVerdict:
    node: str
    host: str
    passed: bool
    evidence: list[str] = field(default_factory=list)
    action: str = ""  # "drain", "resume", "would drain" (act=False), or ""
    state: str = ""
    reason: str = ""
    error: str = ""  # the check or its action could not run

    @property
    def ok(self) -> bool:
        return self.passed and not self.error


@dataclass
class HealthReport:
    cluster: str
    acted: bool
    nodes: list[NodeVerdict]
    # nodes slurmctld holds allocated with no job on them (stranded.py): not drained (a drain
    # frees nothing), reported with their evidence
    stranded: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return all(node.ok for node in self.nodes) and not self.stranded

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "acted": self.acted, "healthy": self.healthy,
                "nodes": [asdict(node) for node in self.nodes], "stranded": self.stranded}


def checker_argv(act: bool) -> list[str]:
    return [HEALTH_PROGRAM_PATH, "--all", "--json"] + ([] if act else ["--no-act"])


def _checker_document(output: str) -> dict[str, Any] | None:
    """The checker's JSON in ``output``: the whole of it locally; through Ansible after its header
    lines (and a Python dict of the task's arguments), with "non-zero return code" after it."""
    decoder = json.JSONDecoder()
    starts = [0] if output.startswith("{") else []
    starts += [match.start() + 1 for match in re.finditer(r"\n\{\n", output)]
    for start in starts:
        try:
            document, _ = decoder.raw_decode(output, start)
        except ValueError:
            continue
        if isinstance(document, dict) and isinstance(document.get("nodes"), list):
            return document
    return None


def _failure_message(code: int, output: str) -> str:
    """What went wrong, from the command's output (through Ansible: what follows its ``rc=N >>``)."""
    body = output.rsplit(" >>\n", 1)[-1].replace("non-zero return code", "").strip()
    message = (body.splitlines() or [f"exit {code}"])[-1]
    if code == 127 or "No such file" in message or "Error executing command" in message:
        return f"{HEALTH_PROGRAM_PATH} is not installed (deploy with health_check.enabled): {message}"
    return message


def parse_host(host: ManagedHost, code: int, output: str) -> list[NodeVerdict]:
    """The checker's verdicts, or one error per node of the host when it gave none."""
    names = [node.name for node in host.slurmd_nodes]
    document = _checker_document(output)
    if document is None:
        message = _failure_message(code, output)
        return [NodeVerdict(name, host.name, False, error=message) for name in names]
    verdicts = []
    for entry in document.get("nodes", []):
        verdicts.append(NodeVerdict(
            entry["node"], host.name, bool(entry.get("passed")), list(entry.get("evidence", [])),
            entry.get("action", ""), entry.get("state", ""), entry.get("reason", ""), entry.get("error", ""),
        ))
    found = {verdict.node for verdict in verdicts}
    verdicts += [NodeVerdict(name, host.name, False, error="the checker did not report this node")
                 for name in names if name not in found]
    return verdicts


def run_health(cluster: Cluster, act: bool = True) -> HealthReport:
    if not cluster.inventory.health_check.enabled:
        raise RefusedError("health_check.enabled is false in the inventory: no health check is installed")
    hosts = [host for host in cluster.hosts.values() if host.slurmd_nodes]
    order = {node.name: index for index, node in enumerate(cluster.nodes)}
    with tempfile.TemporaryDirectory(prefix="cluster-cli-health-") as workdir:
        runner = HostCommand(cluster, Path(workdir))

        def check(host: ManagedHost) -> list[NodeVerdict]:
            code, output = runner.run(host.name, checker_argv(act), HOST_TIMEOUT_S)
            return parse_host(host, code, output)

        with ThreadPoolExecutor(max_workers=min(PARALLEL_HOSTS, max(len(hosts), 1))) as pool:
            verdicts = [verdict for found in pool.map(check, hosts) for verdict in found]
        controller = cluster.inventory.controllers.primary
        stranded = [node.evidence for node in ask_controller(lambda argv: runner.run(controller, argv))]
    verdicts.sort(key=lambda verdict: order.get(verdict.node, len(order)))
    return HealthReport(cluster.name, act, verdicts, stranded)


def verdict_line(verdict: NodeVerdict) -> str:
    if verdict.error:
        text = "ERROR " + (f"{'; '.join(verdict.evidence)}; " if verdict.evidence else "") + verdict.error
    elif verdict.passed:
        text = "pass"
    else:
        text = "FAIL  " + "; ".join(verdict.evidence)
    notes = [verdict.action] if verdict.action else []
    if verdict.reason and not verdict.action:
        notes.append(f"{verdict.state}: {verdict.reason}")
    return f"{verdict.node:16} {verdict.host:16} {text}" + (f"  ({'; '.join(notes)})" if notes else "")
