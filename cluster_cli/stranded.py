"""Capacity Slurm holds with no job: a node whose CPUs, memory or GPUs stay allocated after its
last job ended (seen after a slurmctld restart with a job running, docs/operations.md "Nodes
allocated with no job"). `status` and `health` report such a node as unhealthy with its evidence;
`plan` names it before a deploy.

The evidence is what slurmctld says: `scontrol --oneliner show node` of every node (the node's
allocated figures; never a one-node `sinfo -n`, which slurmctld answers from a cache that can call
an idle node "mixed" for minutes after its start, issue 32) and `squeue --states=all` (no job on it that still runs; the end time of the last one
that did, which slurmctld keeps for MinJobAge). A node is stranded once its allocation has
outlived its last job by ``STRANDED_AFTER_S``: a job's end and its release are not one instant.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from cluster_cli.hostlist import expand
from cluster_cli.node_states import is_allocated
from cluster_cli.smoke.slurm import TERMINAL_STATES

# How long an allocation may outlive the node's last job before it counts as stranded (issue 32:
# every node idle within 30 s of its last job's end).
STRANDED_AFTER_S = 30
NODE_COMMAND = ["scontrol", "--oneliner", "show", "node"]
JOB_COMMAND = ["squeue", "--all", "--noheader", "--states=all", "--format=%i|%T|%e|%N"]
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


@dataclass(frozen=True)
class NodeAllocation:
    """A node's allocated figures from `scontrol show node`, or (``cpus`` None) its sinfo state alone."""

    name: str
    state: str
    cpus: int | None = None
    memory_mb: int = 0
    tres: str = ""  # AllocTRES, e.g. "cpu=1,mem=1.50G,gres/gpu=1"

    @property
    def gpus(self) -> int:
        for item in self.tres.split(","):
            key, _, value = item.partition("=")
            if key == "gres/gpu":
                return int(value) if value.isdigit() else 1
        return 0

    @property
    def allocated(self) -> bool:
        if self.cpus is None:
            return is_allocated(self.state)
        return self.cpus > 0 or self.memory_mb > 0 or self.gpus > 0

    @property
    def figures(self) -> str:
        if self.cpus is None:
            return f"{self.state.lower()} (sinfo)"
        return (f"{self.state.lower()} with {self.cpus} CPUs, {self.memory_mb} MB and {self.gpus} GPUs allocated "
                "(scontrol show node)")


@dataclass(frozen=True)
class JobOnNodes:
    """A job as `squeue --states=all` reports it: its state, its end time (text), its nodes."""

    state: str
    end: str
    nodes: str


def parse_jobs(text: str) -> list[JobOnNodes]:
    """JOB_COMMAND's output."""
    jobs = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 4:
            jobs.append(JobOnNodes(parts[1].strip(), parts[2].strip(), parts[3].strip()))
    return jobs


@dataclass(frozen=True)
class StrandedNode:
    name: str
    evidence: str


def parse_nodes(text: str) -> list[NodeAllocation]:
    """``scontrol --oneliner show node``: one node a line of ``Key=Value`` words."""
    nodes = []
    for line in text.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "NodeName" in fields:
            nodes.append(NodeAllocation(fields["NodeName"], fields.get("State", ""), _number(fields.get("CPUAlloc")),
                                        _number(fields.get("AllocMem")), fields.get("AllocTRES", "")))
    return nodes


def _number(text: str | None) -> int:
    return int(text) if text and text.isdigit() else 0


def _epoch(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text, TIME_FORMAT))
    except ValueError:
        return None  # "N/A", "Unknown": a job that has not ended


def stranded_nodes(
    nodes: list[NodeAllocation], jobs: list[JobOnNodes], now: float | None = None, after_s: float = STRANDED_AFTER_S,
) -> list[StrandedNode]:
    """The allocated nodes with no unfinished job whose allocation outlived their last job by
    ``after_s`` (the jobs' end times are the controller's local time)."""
    now = time.time() if now is None else now
    active: set[str] = set()
    last_end: dict[str, float] = {}
    for job in jobs:
        if not job.nodes or job.nodes == "(null)":
            continue
        ended = _epoch(job.end)
        for name in expand(job.nodes):
            if job.state not in TERMINAL_STATES:
                active.add(name)
            elif ended is not None:
                last_end[name] = max(ended, last_end.get(name, ended))
    found = []
    for node in nodes:
        if not node.allocated or node.name in active:
            continue
        ended = last_end.get(node.name)
        if ended is not None and now - ended < after_s:
            continue
        since = (f"its last job ended {now - ended:.0f} s ago" if ended is not None
                 else "no job that ran there is still known to slurmctld")
        found.append(StrandedNode(node.name, (
            f"{node.name}: {node.figures} but no job on it (squeue -w {node.name}: none); {since}")))
    return found


def ask_controller(run: Callable[[list[str]], tuple[int, str]]) -> list[StrandedNode]:
    """The stranded nodes, from slurmctld's answers (``run`` runs a command on the primary
    controller: exit code, output); none when it does not answer (status reports that itself)."""
    code, nodes = run(NODE_COMMAND)
    if code != 0:
        return []
    code, jobs = run(JOB_COMMAND)
    return stranded_nodes(parse_nodes(nodes), parse_jobs(jobs)) if code == 0 else []
