"""Benchmark: the accounts module's apply of 1,000 users in 50 accounts on a real slurmdbd.

    sudo .venv/bin/python benchmarks/accounting_apply.py [INVENTORY] [--users 1000] [--accounts 50] [--write]

Needs the deployed cluster of INVENTORY (default: the local cluster) and root. It adds ACCOUNTS
accounts (bench-a00.., below the inventory's first account tree root) and USERS users (bench-u0000..,
each in one of them) to the inventory's accounting document and applies it with the accounts
module's own code (cluster_cli/slurm_associations.py, a link to plugins/modules/slurm_associations.py:
five `sacctmgr show` reads, the difference, its sacctmgr calls), as the slurmdbd role does, without
removing anything. It times the first apply, then the re-apply of the same document (the reads and
the comparison: nothing to run), then removes what it added (the inventory's own document with
removal on), and checks that slurmdbd holds the inventory's data again. --write replaces the
subsection in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# deploy_local, devtools
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from deploy_local import machine

from cluster_cli import slurm_associations as module
from cluster_cli.loader import load_cluster
from cluster_cli.model import SlurmAccount, SlurmUser
from cluster_cli.slurm_accounting import account_entry, accounting_document, user_entry
from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
PARENT = "## Teams as data: accounts, QoS and associations (issue 33)"
SECTION = "### Apply of 1,000 users on the local cluster"
FIRST_GOAL_S, AGAIN_GOAL_S = 60.0, 5.0


@dataclass(frozen=True)
class Apply:
    wall_s: float
    changes: int
    calls: int


def run(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} ... failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def apply(document: dict[str, Any], env: dict[str, str], remove: bool) -> Apply:
    """One apply as the module makes it: read, compare, run the calls."""
    started = time.monotonic()
    outputs = {name: run(argv, env) for name, argv in module.read_commands(document["cluster"]).items()}
    state = module.current_state(outputs)
    changes = module.diff(document, state, remove)
    argvs = module.commands(changes, document["cluster"], document["cluster"].lower() in state["clusters"])
    for argv in argvs:
        run(argv, env)
    return Apply(time.monotonic() - started, len(changes), len(argvs))


def with_bench_entries(document: dict[str, Any], users: int, accounts: int) -> dict[str, Any]:
    """``document`` with ``accounts`` accounts below its first one and ``users`` users spread over
    them, as slurm_accounting writes entries from the inventory's."""
    parent = document["accounts"][0]["name"] if document["accounts"] else "root"
    names = [f"bench-a{index:02d}" for index in range(accounts)]
    added_accounts = [account_entry(SlurmAccount(name=name, parent=parent, shares=1 + index % 4))
                      for index, name in enumerate(names)]
    added_users = [user_entry(SlurmUser(name=f"bench-u{index:04d}", account=names[index % accounts]), names[0])
                   for index in range(users)]
    return {**document, "accounts": [*document["accounts"], *added_accounts], "users": [*document["users"], *added_users]}


def report(inventory: Path, users: int, accounts: int, first: Apply, again: Apply, removal: Apply) -> str:
    verdict = "met" if first.wall_s <= FIRST_GOAL_S and again.wall_s <= AGAIN_GOAL_S else "not met"
    return "\n".join([
        SECTION, "",
        f"`sudo .venv/bin/python benchmarks/accounting_apply.py {inventory.relative_to(REPO)} --users {users} "
        f"--accounts {accounts} --write`: the accounts module's own reading, comparison and sacctmgr calls "
        "against the deployed cluster's slurmdbd, as the slurmdbd role runs them. Machine: " + machine() + ".", "",
        "| step | goal | wall | changes | sacctmgr calls (besides the 5 reads) |",
        "|---|---|---|---|---|",
        f"| first apply: {accounts} accounts, {users} users added | <= {FIRST_GOAL_S:.0f} s | {first.wall_s:.1f} s | "
        f"{first.changes} | {first.calls} |",
        f"| re-apply, nothing changed | <= {AGAIN_GOAL_S:.0f} s | {again.wall_s:.2f} s | {again.changes} | {again.calls} |",
        f"| removal of what the benchmark added (the inventory's data, removal on) | - | {removal.wall_s:.1f} s | "
        f"{removal.changes} | {removal.calls} |",
        "", f"Goals {verdict}.", "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inventory", nargs="?", type=Path, default=REPO / "inventories" / "local" / "inventory.yaml")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--write", action="store_true", help="write the results into docs/benchmarks.md")
    options = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: sacctmgr changes slurmdbd as its administrator")
    cluster = load_cluster(options.inventory.resolve())
    env = dict(os.environ, SLURM_CONF=f"{cluster.inventory.slurm.paths.conf_dir}/slurm.conf")
    document = accounting_document(cluster)
    bench = with_bench_entries(document, options.users, options.accounts)
    first = apply(bench, env, remove=False)
    again = apply(bench, env, remove=False)
    removal = apply(document, env, remove=True)
    left = apply(document, env, remove=True)
    if left.changes:
        raise SystemExit(f"slurmdbd does not hold the inventory's data after the removal: {left.changes} changes left")
    text = report(options.inventory.resolve(), options.users, options.accounts, first, again, removal)
    print(text)
    if options.write:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text, PARENT))


if __name__ == "__main__":
    main()
