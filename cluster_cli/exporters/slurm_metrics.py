"""Slurm's state as Prometheus metrics, read on the controller with bounded calls: nodes by state
(drain reasons counted), CPUs, memory and GPUs allocated and in all per partition and GPU type,
jobs by state per partition and account, pending reasons, queue wait, the scheduler's statistics
from ``sdiag``, whether slurmdbd answers, and the scrape's own cost.

Each call asks only the fields it needs (``sinfo -O``, ``squeue -o``: the full JSON of 100,000
jobs is far too large) with a timeout. When slurmctld does not answer, the last good figures are
served again with ``cluster_slurm_up 0`` and ``cluster_slurm_stale_seconds``, so a dashboard keeps
its picture and an alert sees the outage. Standard library only.

    python -m cluster_cli.exporters.slurm_metrics --once
    python -m cluster_cli.exporters.slurm_metrics --listen 127.0.0.1:9446 [--accounting]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime

from cluster_cli import hostlist
from cluster_cli.exporters import text_format
from cluster_cli.exporters.text_format import Sample
from cluster_cli.node_states import STATE_FLAGS, is_allocated

PREFIX = "cluster_slurm_"
SINFO = ["sinfo", "--noheader", "--Node", "--Format=NodeList:|,Partition:|,StateLong:|,CPUsState:|,Memory:|,"
         "AllocMem:|,Gres:|,GresUsed:|,User:|,Reason:"]  # fmt: skip
SQUEUE = ["squeue", "--noheader", "--all", "--format=%P|%a|%T|%r|%V|%N"]
SDIAG = ["sdiag"]
SACCTMGR = ["sacctmgr", "--noheader", "--parsable2", "show", "cluster", "format=cluster"]
CALL_TIMEOUT_S = 10.0
REASON_CHARS = 80  # a drain reason is a label: bounded
#: name -> (type, help)
METRICS = {
    "up": ("gauge", "1 when slurmctld answered this scrape"),
    "stale_seconds": ("gauge", "age of the figures served (0 when fresh)"),
    "nodes": ("gauge", "nodes by partition and state"),
    "drained_nodes": ("gauge", "drained or draining nodes by reason and by whom (the user who set it)"),
    "allocated_nodes_without_job": ("gauge", "nodes Slurm holds allocated (mixed, allocated) that no job lists"),
    "cpus": ("gauge", "CPUs by partition and state (allocated, idle, other, total)"),
    "memory_bytes": ("gauge", "memory by partition (allocated, total)"),
    "gpus": ("gauge", "GPUs by partition, type and state (allocated, total)"),
    "jobs": ("gauge", "jobs by partition, account and state"),
    "pending_jobs": ("gauge", "pending jobs by partition and reason"),
    "queue_wait_max_seconds": ("gauge", "longest wait of a pending job, by partition"),
    "queue_wait_seconds_sum": ("gauge", "summed wait of the pending jobs, by partition"),
    "scheduler": ("gauge", "sdiag's figures (server threads, agent queue, cycles in microseconds, jobs since reset)"),
    "slurmdbd_up": ("gauge", "1 when slurmdbd answered (sacctmgr), with --accounting"),
    "scrape_seconds": ("gauge", "time this scrape took"),
}
#: sdiag's line -> the `figure` label
SDIAG_FIGURES = {
    "Server thread count": "server_threads", "Agent queue size": "agent_queue", "DBD Agent queue size": "dbd_agent_queue",
    "Jobs submitted": "jobs_submitted", "Jobs started": "jobs_started", "Jobs completed": "jobs_completed",
    "Jobs canceled": "jobs_canceled", "Jobs failed": "jobs_failed",
}  # fmt: skip
_CYCLE = re.compile(r"^\s*(Last cycle|Max cycle|Mean cycle|Total cycles):\s+(\d+)\s*$")
_GRES_GPU = re.compile(r"gpu(?::([^:(,]+))?:(\d+)")

@dataclass
class Answer:
    ok: bool
    text: str


def call(argv: list[str], timeout: float = CALL_TIMEOUT_S) -> Answer:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return Answer(False, str(error))
    return Answer(done.returncode == 0, done.stdout if done.returncode == 0 else done.stderr)


def node_state(long_state: str) -> str:
    """``mixed+drain`` -> ``mixed+drain``, ``idle*`` -> ``idle+not_responding``: one label value."""
    state = long_state.strip().lower()
    flags = [char for char in state if char in STATE_FLAGS]
    base = state.rstrip(STATE_FLAGS)
    return base + ("+not_responding" if "*" in flags else "")


def gpu_counts(gres: str) -> dict[str, int]:
    """``gpu:h100:8(S:0-1)`` -> {"h100": 8}; an untyped ``gpu:4`` -> {"": 4}."""
    counts: Counter[str] = Counter()
    for kind, count in _GRES_GPU.findall(gres):
        counts[kind if kind and not kind.isdigit() else ""] += int(count)
    return dict(counts)


@dataclass
class NodeFigures:
    nodes: Counter[tuple[str, str]] = field(default_factory=Counter)
    drained: Counter[tuple[str, str]] = field(default_factory=Counter)
    cpus: Counter[tuple[str, str]] = field(default_factory=Counter)
    memory: Counter[tuple[str, str]] = field(default_factory=Counter)
    gpus: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    allocated: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)

    def add(self, cells: list[str]) -> None:
        name, partition, state, cpu_state, mem_total, mem_alloc, gres, gres_used, by, reason = cells[:10]
        partition, state = partition.rstrip("*"), node_state(state)
        self.nodes[(partition, state)] += 1
        first = name not in self.seen  # a node is listed once per partition
        self.seen.add(name)
        if first and "drain" in state:
            self.drained[(reason.strip()[:REASON_CHARS] or "none", by.strip())] += 1
        if is_allocated(state):
            self.allocated.add(name)
        for kind, value in zip(("allocated", "idle", "other", "total"), cpu_state.split("/"), strict=False):
            self.cpus[(partition, kind)] += int(value) if value.isdigit() else 0
        self.memory[(partition, "total")] += _mebibytes(mem_total)
        self.memory[(partition, "allocated")] += _mebibytes(mem_alloc)
        for kind, count in gpu_counts(gres).items():
            self.gpus[(partition, kind, "total")] += count
        for kind, count in gpu_counts(gres_used).items():
            self.gpus[(partition, kind, "allocated")] += count

    def samples(self) -> list[Sample]:
        return [
            *(("nodes", {"partition": p, "state": s}, n) for (p, s), n in sorted(self.nodes.items())),
            *(("drained_nodes", {"reason": r, "by": b}, n) for (r, b), n in sorted(self.drained.items())),
            *(("cpus", {"partition": p, "state": s}, n) for (p, s), n in sorted(self.cpus.items())),
            *(("memory_bytes", {"partition": p, "state": s}, n) for (p, s), n in sorted(self.memory.items())),
            *(("gpus", {"partition": p, "type": t, "state": s}, n) for (p, t, s), n in sorted(self.gpus.items())),
        ]


def node_figures(text: str) -> NodeFigures:
    figures = NodeFigures()
    for line in text.splitlines():
        cells = line.split("|")
        if len(cells) >= 10:
            figures.add(cells)
    return figures


def node_samples(text: str) -> list[Sample]:
    return node_figures(text).samples()


def nodes_with_jobs(squeue: str) -> set[str]:
    """The nodes squeue's jobs list (its last column, a hostlist)."""
    names: set[str] = set()
    for line in squeue.splitlines():
        nodelist = line.rsplit("|", 1)[-1].strip()
        if nodelist and not nodelist.startswith("("):
            names.update(hostlist.expand(nodelist))
    return names


def _mebibytes(text: str) -> int:
    return int(text) << 20 if text.strip().isdigit() else 0


def job_samples(text: str, now: float) -> list[Sample]:
    jobs: Counter[tuple[str, str, str]] = Counter()
    pending: Counter[tuple[str, str]] = Counter()
    wait_max: dict[str, float] = {}
    wait_sum: dict[str, float] = {}
    for line in text.splitlines():
        cells = line.split("|")
        if len(cells) < 5:
            continue
        partition, account, state, reason, submitted = cells[:5]  # then the nodes: nodes_with_jobs
        account = "" if account == "(null)" else account
        jobs[(partition, account, state.lower())] += 1
        if state == "PENDING":
            pending[(partition, _reason(reason))] += 1
            wait = max(0.0, now - _epoch(submitted))
            wait_max[partition] = max(wait_max.get(partition, 0.0), wait)
            wait_sum[partition] = wait_sum.get(partition, 0.0) + wait
    return [
        *(("jobs", {"partition": p, "account": a, "state": s}, n) for (p, a, s), n in sorted(jobs.items())),
        *(("pending_jobs", {"partition": p, "reason": r}, n) for (p, r), n in sorted(pending.items())),
        *(("queue_wait_max_seconds", {"partition": p}, round(w, 3)) for p, w in sorted(wait_max.items())),
        *(("queue_wait_seconds_sum", {"partition": p}, round(w, 3)) for p, w in sorted(wait_sum.items())),
    ]


def _reason(reason: str) -> str:
    """squeue's long sentence for a drained node's pending reason -> a short label value."""
    return "NodeDown" if reason.startswith("Nodes required for job are DOWN") else reason[:REASON_CHARS]


def _epoch(timestamp: str) -> float:
    try:
        return datetime.fromisoformat(timestamp.strip()).timestamp()
    except ValueError:
        return time.time()


def sdiag_samples(text: str) -> list[Sample]:
    samples: list[Sample] = []
    section = "main"
    for line in text.splitlines():
        if line.startswith("Backfilling stats"):
            section = "backfill"
        elif line.startswith("Remote Procedure Call"):
            break
        key, _, value = line.partition(":")
        if key.strip() in SDIAG_FIGURES and value.strip().isdigit() and not line.startswith("\t"):
            samples.append(("scheduler", {"figure": SDIAG_FIGURES[key.strip()]}, int(value)))
        cycle = _CYCLE.match(line)
        if cycle and line.startswith("\t"):
            figure = f"{section}_{cycle.group(1).lower().replace(' ', '_')}"
            samples.append(("scheduler", {"figure": figure}, int(cycle.group(2))))
    return samples


@dataclass
class Exporter:
    """Scrapes; keeps the last good figures to serve while slurmctld does not answer."""

    accounting: bool = False
    run: Callable[[list[str]], Answer] = call
    clock: Callable[[], float] = time.time
    _last_good: list[Sample] = field(default_factory=list)
    _last_good_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def scrape(self) -> list[Sample]:
        with self._lock:
            started = time.monotonic()
            now = self.clock()
            answers = [self.run(argv) for argv in (SINFO, SQUEUE, SDIAG)]
            up = all(answer.ok for answer in answers)
            if up:
                nodes = node_figures(answers[0].text)
                without_job = len(nodes.allocated - nodes_with_jobs(answers[1].text))
                self._last_good = [*nodes.samples(), ("allocated_nodes_without_job", {}, without_job),
                                   *job_samples(answers[1].text, now), *sdiag_samples(answers[2].text)]
                self._last_good_at = now
            stale = 0.0 if up or not self._last_good_at else round(now - self._last_good_at, 3)
            samples = [("up", {}, int(up)), ("stale_seconds", {}, stale), *self._last_good]
            if self.accounting:
                samples.append(("slurmdbd_up", {}, int(self.run(SACCTMGR).ok)))
            samples.append(("scrape_seconds", {}, round(time.monotonic() - started, 6)))
            return samples


def exposition(samples: Iterable[Sample]) -> str:
    """Prometheus' text format of a scrape's samples."""
    return text_format.exposition(PREFIX, METRICS, samples)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="slurm_metrics", description=__doc__.split("\n\n")[0])
    parser.add_argument("--once", action="store_true", help="print one scrape and exit")
    parser.add_argument("--listen", default="127.0.0.1:9446", help="ADDRESS:PORT to serve /metrics on")
    parser.add_argument("--accounting", action="store_true", help="also ask slurmdbd (sacctmgr)")
    args = parser.parse_args(argv)
    exporter = Exporter(accounting=args.accounting)
    if args.once:
        sys.stdout.write(exposition(exporter.scrape()))
        return 0
    address, _, port = args.listen.rpartition(":")
    text_format.serve(lambda: exposition(exporter.scrape()), address, int(port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
