"""Benchmark: the job templates' sweep of 16 tasks on a deployed cluster, submit to results table.

    sudo .venv/bin/python benchmarks/template_sweep.py [INVENTORY] [--user alice] [--write]

Needs the deployed cluster of INVENTORY (default: the local cluster) and root; runs as USER (an
unprivileged user of the inventory's people with an association: alice on the local cluster), in a
fresh copy of the templates installed at `training.examples_dir`, as a user would: a 16-point grid
(lr 4 values x hidden 4 values, 100 steps each) through `submit-sweep.sh`, then waits for the collect
job. Reports the time from the submit to the results table, the tasks' own time (sacct), and
checks that the table lists all 16 tasks, ok, best first. --write replaces its subsection in
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from deploy_local import machine

from cluster_cli.loader import load_cluster
from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
PARENT = "## Job templates for users (issue 36)"
SECTION = "### A sweep of 16 tasks: submit to results table"
SPACE = """\
[sweep]
method = "grid"
metric = "val_loss"
goal = "min"

[parameters]
lr = [0.01, 0.03, 0.1, 0.3]
hidden = [16, 32, 64, 128]
steps = [100]
"""


def as_user(user: str, cwd: Path, *argv: str) -> str:
    return subprocess.run(["runuser", "-u", user, "--", *argv], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout


def wait_until_gone(jobs: list[str], timeout: float) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        queued = subprocess.run(["squeue", "-h", "-j", ",".join(jobs)], capture_output=True, text=True, check=False)
        if not queued.stdout.strip():  # squeue fails for jobs already gone: nothing queued either
            return
        time.sleep(0.5)
    raise SystemExit(f"jobs {jobs} still queued after {timeout:.0f} s")


def task_seconds(job: str) -> list[int]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "ElapsedRaw", "-j", job], capture_output=True,
                         text=True, check=True).stdout
    return [int(value) for value in out.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inventory", nargs="?", type=Path, default=REPO / "inventories" / "local" / "inventory.yaml")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    installed = Path(load_cluster(args.inventory).inventory.training.examples_dir)
    home = Path(subprocess.run(["getent", "passwd", args.user], capture_output=True, text=True, check=True)
                .stdout.split(":")[5])
    work = Path(tempfile.mkdtemp(prefix="sweep-bench-", dir=home))
    shutil.chown(work, args.user)
    as_user(args.user, home, "cp", "-r", str(installed) + "/.", str(work))
    (work / "bench.toml").write_text(SPACE)
    shutil.chown(work / "bench.toml", args.user)

    started = time.monotonic()
    submitted = as_user(args.user, work, "bash", "submit-sweep.sh", "bench.toml")
    sweep, collect = re.findall(r"job (\d+)", submitted)
    wait_until_gone([sweep, collect], 1800)
    elapsed = time.monotonic() - started
    rows = list(csv.DictReader((work / f"sweep-{sweep}" / "results.csv").open()))
    complete = sorted(int(row["task"]) for row in rows) == list(range(16)) and all(row["status"] == "ok" for row in rows)
    seconds = task_seconds(sweep)
    text = (f"{SECTION}\n\n{machine()}; `{args.inventory.relative_to(REPO)}`, as `{args.user}`.\n\n"
            "| what | value |\n|---|---|\n"
            f"| submit (`bash submit-sweep.sh`) to the results table written | {elapsed:.1f} s |\n"
            f"| tasks: each (sacct elapsed, min / median / max) | {min(seconds)} / {sorted(seconds)[len(seconds) // 2]} / {max(seconds)} s |\n"
            f"| the table: 16 tasks, all ok, best first | {'yes' if complete else 'NO'} |\n"
            f"| best | task {rows[0]['task']}: lr {rows[0]['lr']}, hidden {rows[0]['hidden']}, val_loss {rows[0]['val_loss']} |\n")
    print(text)
    if args.write:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text, parent=PARENT))
    shutil.rmtree(work)
    if not complete:
        raise SystemExit("the results table is not complete")


if __name__ == "__main__":
    main()
