"""What each task costs the control node, worker by worker, for one run of a command that runs
ansible-playbook (a deploy, usually).

    .venv/bin/python benchmarks/worker_cost.py [--hosts REGEX] -- .venv/bin/python -m cluster_cli deploy --full INVENTORY

The command runs with benchmarks/worker_cost_site on PYTHONPATH: its sitecustomize records, in
ansible-playbook only, each worker's own CPU (user + sys, from its fork to the end of its task)
and minor page faults, one worker per task and host, and the main process's own CPU. The table
lists the tasks of the hosts --hosts matches (default: all) by CPU, then the totals. What it
leaves out: the fork (the main process's), a worker's exit, the ssh clients (0.001 s each on the
test bed) and cluster-cli's own process.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SITE = Path(__file__).resolve().parent / "worker_cost_site"


@dataclass
class TaskWorkers:
    task: str
    workers: int = 0
    cpu_s: float = 0.0
    minor_faults: int = 0

    @property
    def mean_ms(self) -> float:
        return 1000 * self.cpu_s / self.workers if self.workers else 0.0


@dataclass
class WorkerCost:
    tasks: list[TaskWorkers]  # by CPU, dearest first
    hosts: int
    main_cpu_s: float | None

    @property
    def workers(self) -> int:
        return sum(task.workers for task in self.tasks)

    @property
    def cpu_s(self) -> float:
        return sum(task.cpu_s for task in self.tasks)

    @property
    def mean_ms(self) -> float:
        return 1000 * self.cpu_s / self.workers if self.workers else 0.0


def read_records(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summarize(records: Iterable[dict[str, object]], hosts: str = ".*") -> WorkerCost:
    """The workers of the hosts ``hosts`` (a regular expression, whole name) per task; the main
    process's CPU (None when it did not record it)."""
    pattern = re.compile(hosts)
    tasks: dict[str, TaskWorkers] = {}
    seen_hosts: set[str] = set()
    main_cpu_s = None
    for record in records:
        if record.get("kind") == "main":
            main_cpu_s = float(record["cpu_s"])  # type: ignore[arg-type]
            continue
        host = str(record["host"])
        if not pattern.fullmatch(host):
            continue
        seen_hosts.add(host)
        entry = tasks.setdefault(str(record["task"]), TaskWorkers(str(record["task"])))
        entry.workers += 1
        entry.cpu_s += float(record["cpu_s"])  # type: ignore[arg-type]
        entry.minor_faults += int(record["minor_faults"])  # type: ignore[call-overload]
    ranked = sorted(tasks.values(), key=lambda task: (-task.cpu_s, task.task))
    return WorkerCost(tasks=ranked, hosts=len(seen_hosts), main_cpu_s=main_cpu_s)


def report(cost: WorkerCost, top: int = 25) -> str:
    lines = ["| task | workers | CPU-s | ms per worker | minor faults per worker |", "|---|---|---|---|---|"]
    for task in cost.tasks[:top]:
        faults = task.minor_faults // task.workers if task.workers else 0
        lines.append(f"| {task.task} | {task.workers} | {task.cpu_s:.2f} | {task.mean_ms:.0f} | {faults} |")
    per_host = cost.cpu_s / cost.hosts if cost.hosts else 0.0
    lines.append("")
    lines.append(f"{cost.workers} workers on {cost.hosts} hosts: {cost.cpu_s:.2f} CPU-s, {per_host:.2f} per host, "
                 f"{cost.mean_ms:.0f} ms per worker.")
    if cost.main_cpu_s is not None:
        lines.append(f"Main ansible-playbook process (all hosts): {cost.main_cpu_s:.2f} CPU-s.")
    return "\n".join(lines)


def measured_environment(log: Path) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "WORKER_COST_LOG": str(log),
            "PYTHONPATH": f"{SITE}{os.pathsep}{path}" if path else str(SITE)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", default=".*", help="regular expression of the hosts to count (whole name)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    with tempfile.TemporaryDirectory(prefix="worker-cost-") as scratch:
        log = Path(scratch) / "workers.jsonl"
        completed = subprocess.run(command, env=measured_environment(log), check=False)
        print(report(summarize(read_records(log), args.hosts), args.top))
    sys.exit(completed.returncode)


if __name__ == "__main__":
    main()
