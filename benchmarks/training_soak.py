"""Run the smoke suite's training checks many times in a row on the deployed local cluster.

    sudo .venv/bin/python benchmarks/training_soak.py [-n 50] [--only allreduce,ddp,fsdp,preempt] [--write]

Each round is one `cluster-cli smoke INVENTORY --only CHECKS --json F`, as a user runs it. The
table counts, per check, the rounds that passed, passed with a warning (a job that ended badly
after its results were complete) and failed, with the median check time; every failure is listed
with its reason. The run goes on after a failure, so the count says how often, not only whether.
--write puts the table in docs/benchmarks.md under "Training checks: rounds in a row", rewritten
after every round. Exit 1 when any round failed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]  # deploy_local, devtools
from deploy_local import INVENTORY, machine

from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
SECTION = "## Training checks: rounds in a row (local cluster)"
CHECKS = "allreduce,ddp,fsdp,preempt"


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_round(inventory: str, only: str, report: Path) -> tuple[list[dict], float, float]:
    wall, cpu = time.monotonic(), children_cpu_s()
    done = subprocess.run(
        [sys.executable, "-m", "cluster_cli", "smoke", inventory, "--only", only, "--json", str(report)],
        cwd=REPO, capture_output=True, text=True, timeout=1800, check=False,
    )
    wall, cpu = time.monotonic() - wall, children_cpu_s() - cpu
    if not report.exists():
        raise SystemExit(f"smoke wrote no report (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return json.loads(report.read_text())["checks"], wall, cpu


def outcome(check: dict) -> str:
    if check["verdict"] == "pass" and check.get("warnings"):
        return "warn"
    return str(check["verdict"])


def table(rounds: int, tally: dict[str, Counter], times: dict[str, list[float]], failures: list[str],
          wall: list[float], cpu: list[float], started: str) -> str:
    lines = [
        SECTION,
        "",
        f"Measured by `benchmarks/training_soak.py`: {rounds} rounds on {started}; each round is one "
        f"`cluster-cli smoke --only {CHECKS}` on the deployed 3-node local cluster (gloo on CPU).",
        f"A round took {statistics.median(wall):.1f} s wall (median; {min(wall):.1f}-{max(wall):.1f} s) "
        f"and {statistics.median(cpu):.1f} CPU-s of the smoke process tree (its Slurm jobs' CPU is the daemons').",
        "",
        "| check | rounds | pass | pass with warning | fail | median check time |",
        "|---|---|---|---|---|---|",
    ]
    for name, counts in tally.items():
        lines.append(
            f"| {name} | {sum(counts.values())} | {counts['pass']} | {counts['warn']} | {counts['fail']} "
            f"| {statistics.median(times[name]):.1f} s |"
        )
    lines += ["", "Failures and warnings: " + ("none." if not failures else "")]
    lines += [f"- {line}" for line in failures]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--rounds", type=int, default=50)
    parser.add_argument("--only", default=CHECKS)
    parser.add_argument("--inventory", default=str(INVENTORY))
    parser.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    options = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: smoke submits its jobs as the test user")
    started = machine()
    tally: dict[str, Counter] = {name: Counter() for name in options.only.split(",")}
    times: dict[str, list[float]] = {name: [] for name in tally}
    failures: list[str] = []
    walls: list[float] = []
    cpus: list[float] = []
    with tempfile.TemporaryDirectory(prefix="training-soak-") as scratch:
        for number in range(1, options.rounds + 1):
            checks, wall, cpu = one_round(options.inventory, options.only, Path(scratch) / f"round-{number}.json")
            walls.append(wall)
            cpus.append(cpu)
            for check in checks:
                tally[check["name"]][outcome(check)] += 1
                times[check["name"]].append(check["duration_s"])
                if outcome(check) != "pass":
                    what = check["reason"] if check["verdict"] != "pass" else "; ".join(check["warnings"])
                    failures.append(f"round {number}, {check['name']} ({outcome(check)}): {what}")
            print(f"round {number}: " + ", ".join(f"{c['name']} {outcome(c)}" for c in checks)
                  + f" ({wall:.1f} s)", flush=True)
            if options.write:  # after every round: a run cut short still leaves what it measured
                text = table(number, tally, times, failures, walls, cpus, started)
                BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text))
    print(table(options.rounds, tally, times, failures, walls, cpus, started))
    raise SystemExit(1 if any(counts["fail"] for counts in tally.values()) else 0)


if __name__ == "__main__":
    main()
