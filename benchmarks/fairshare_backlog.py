"""Benchmark: completed jobs of two accounts under a backlog, against their fair-share shares.

    sudo .venv/bin/python benchmarks/fairshare_backlog.py [INVENTORY] [--minutes 12] [--job-seconds 20] [--write]

Needs the deployed cluster of INVENTORY (default: the local cluster, whose team-a and team-b
share 3:1) and root; submits as the inventory's `training.test_user`. The two accounts are the
smoke suite's fairshare pair (smoke_control/accounting_targets.fairshare: two siblings the test
user may charge, with different shares). Each account gets a job array big enough to keep every
node busy for the whole run by itself, submitted together, each task one node (`--exclusive`)
for JOB_SECONDS; after MINUTES the rest is cancelled and sacct counts each account's completed
tasks. Slurm's multifactor priority should start the under-served account's jobs, so the
completed counts approach the shares; the goal: each account's part within 20% of its share's
part. Usage from earlier runs counts (sshare's RawUsage before and after is in the report), and the
factors move once per PriorityCalcPeriod. --write replaces the subsection in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from deploy_local import machine
from sched_throughput import Client, job_id

from cluster_cli.loader import load_cluster
from cluster_cli.smoke_control.accounting_targets import fairshare
from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
PARENT = "## Teams as data: accounts, QoS and associations (issue 33)"
SECTION = "### Completed jobs under a backlog, against the shares"
TOLERANCE = 0.20
NAME = "fairshare-backlog"


@dataclass(frozen=True)
class Run:
    accounts: tuple[str, str]
    shares: tuple[int, int]
    completed: tuple[int, int]
    minutes: float
    job_seconds: int
    nodes: int
    usage_before: dict[str, str]
    usage_after: dict[str, str]

    def part(self, index: int) -> float:
        return self.completed[index] / max(sum(self.completed), 1)

    def share(self, index: int) -> float:
        return self.shares[index] / sum(self.shares)

    def deviation(self, index: int) -> float:
        """How far the account's part of the completed jobs is from its share's part, relative to it."""
        return abs(self.part(index) - self.share(index)) / self.share(index)

    @property
    def met(self) -> bool:
        return sum(self.completed) > 0 and all(self.deviation(index) <= TOLERANCE for index in (0, 1))


def raw_usage(client: Client, accounts: tuple[str, str]) -> dict[str, str]:
    """Each account's RawUsage (sshare -l, the account rows)."""
    out = client.run("sshare", "-n", "-P", "-a", "-o", "Account,User,RawUsage", "-A", ",".join(accounts), as_root=True)
    return {fields[0].strip(): fields[2] for fields in (line.split("|") for line in out.splitlines())
            if len(fields) == 3 and not fields[1] and fields[0].strip() in accounts}


def completed_per_account(sacct_output: str, accounts: tuple[str, str]) -> tuple[int, int]:
    """COMPLETED tasks per account, from `sacct -X -n -P -o Account,State`."""
    counts = dict.fromkeys(accounts, 0)
    for line in sacct_output.splitlines():
        account, _, state = line.partition("|")
        if account in counts and state.split()[:1] == ["COMPLETED"]:
            counts[account] += 1
    return counts[accounts[0]], counts[accounts[1]]


def backlog(client: Client, accounts: tuple[str, str], tasks: int, job_seconds: int) -> list[str]:
    options = ["--parsable", f"--job-name={NAME}", "-N1", "--exclusive", "-t", "5", "-o", "/dev/null",
               "--chdir=/tmp", f"--array=0-{tasks - 1}", f"--wrap=sleep {job_seconds}"]
    return [job_id(client.run("sbatch", f"--account={account}", *options)) for account in accounts]


def measure(inventory: Path, minutes: float, job_seconds: int) -> Run:
    cluster = load_cluster(inventory)
    pair = fairshare(cluster)
    if pair is None:
        raise SystemExit(f"{inventory}: no two sibling accounts with different shares that the test user may charge")
    accounts = (pair["accounts"][0], pair["accounts"][1])
    client = Client(cluster.inventory.training.test_user, f"{cluster.inventory.slurm.paths.conf_dir}/slurm.conf")
    nodes = len(cluster.nodes)
    tasks = math.ceil(minutes * 60 / job_seconds) * nodes + nodes
    before = raw_usage(client, accounts)
    ids = backlog(client, accounts, tasks, job_seconds)
    try:
        time.sleep(minutes * 60)
    finally:
        client.run("scancel", *ids)
    time.sleep(2)
    out = client.run("sacct", "-X", "-n", "-P", "-o", "Account,State", "-j", ",".join(ids), as_root=True)
    return Run(accounts, (pair["shares"][0], pair["shares"][1]), completed_per_account(out, accounts), minutes,
               job_seconds, nodes, before, raw_usage(client, accounts))


def section(run: Run, inventory: Path) -> str:
    rows = [f"| {run.accounts[index]} | {run.shares[index]} ({run.share(index):.0%}) | {run.completed[index]} "
            f"({run.part(index):.1%}) | {run.deviation(index):.0%} | {run.usage_before.get(run.accounts[index], '?')} -> "
            f"{run.usage_after.get(run.accounts[index], '?')} |" for index in (0, 1)]
    return "\n".join([
        SECTION, "",
        f"`sudo .venv/bin/python benchmarks/fairshare_backlog.py {inventory} --minutes {run.minutes:g} "
        f"--job-seconds {run.job_seconds} --write`: a backlog of one-node tasks of {run.job_seconds} s for each "
        f"account, {run.nodes} nodes, {run.minutes:g} min. Machine: {machine()}.", "",
        "| account | shares | completed | off its share by | RawUsage before -> after |", "|---|---|---|---|---|",
        *rows, "",
        f"Goal: each account's part of the completed jobs within {TOLERANCE:.0%} of its share's part: "
        f"{'met' if run.met else 'NOT met'}.", "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inventory", nargs="?", type=Path, default=Path("inventories/local/inventory.yaml"))
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--job-seconds", type=int, default=20)
    parser.add_argument("--write", action="store_true", help="replace the subsection in docs/benchmarks.md")
    options = parser.parse_args()
    run = measure(options.inventory, options.minutes, options.job_seconds)
    text = section(run, options.inventory)
    print(text)
    if options.write:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text, PARENT))


if __name__ == "__main__":
    main()
