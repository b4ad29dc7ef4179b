"""Benchmark: the control node's and a host's share of 1,000 people (Linux users) in 50 groups.

    .venv/bin/python benchmarks/people_plan.py [--users 1000] [--groups 50] [--hosts 1000] [--write]

No host is touched. It writes the local inventory with USERS people in GROUPS groups (each user
in one group, with an SSH key) and times, in this process: loading and validating it
(`cluster-cli validate`'s work), the people document the roles get, `plan`'s people rows for
HOSTS hosts without a deploy record (every host: everything to make) and with one after a user
was added (every host: one row), and plugins/modules/cluster_people.py's own check and command
list on one host that has none of them yet (what its run decides before the commands run). The
median of 5 runs each. --write replaces the subsection in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
import importlib.util

import yaml
from deploy_local import machine

from cluster_cli.deployed import DeployedRecord
from cluster_cli.loader import load_cluster
from cluster_cli.people_accounts import document_checksum, people_document
from cluster_cli.plan import people_changes_by_host
from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
PARENT = "## Teams as data: accounts, QoS and associations (issue 33)"
SECTION = "### People: 1,000 Linux users on the control node and on a host"
PLAN_GOAL_S = 2.0
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBenchKey"
_SPEC = importlib.util.spec_from_file_location("cluster_people", REPO / "plugins" / "modules" / "cluster_people.py")
assert _SPEC is not None and _SPEC.loader is not None
MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(MODULE)


def inventory_text(users: int, groups: int) -> str:
    data = yaml.safe_load((REPO / "inventories" / "local" / "inventory.yaml").read_text())
    data["people"] = {
        "groups": [{"name": f"bench-g{index:02d}", "gid": 20000 + index} for index in range(groups)],
        "users": [{"name": f"bench-u{index:04d}", "uid": 30000 + index, "groups": [f"bench-g{index % groups:02d}"],
                   "ssh_keys": [f"{KEY} u{index}"]} for index in range(users)],
    }
    return yaml.safe_dump(data, sort_keys=False)


def median_s(step: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(5):
        started = time.perf_counter()
        result = step()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def measure(users: int, groups: int, hosts: int) -> list[tuple[str, float, str]]:
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "inventory.yaml"
        path.write_text(inventory_text(users, groups))
        load_s, cluster = median_s(lambda: load_cluster(path))
    names = [f"host{index:04d}" for index in range(hosts)]
    document_s, document = median_s(lambda: people_document(cluster.inventory))
    fresh_s, fresh = median_s(lambda: people_changes_by_host(cluster, names, DeployedRecord()))
    record = DeployedRecord()
    fewer = {**document, "users": document["users"][:-1]}
    record.remember_people(fewer, document_checksum(fewer), names)
    again_s, again = median_s(lambda: people_changes_by_host(cluster, names, record))
    empty_host = {"users": {"root": {"uid": 0, "gid": 0, "home": "/root", "shell": "/bin/bash"}},
                  "groups": {"root": {"gid": 0, "members": set()}}, "expiry": {},
                  "local_users": {"root"}, "local_groups": {"root"}}
    params = {**document, "host": "c1", "root": "/"}
    module_s, steps = median_s(lambda: (MODULE.check(params, empty_host), MODULE.commands(params, empty_host, {}))[1])
    return [
        ("load and validate the inventory", load_s, f"{users} users in {groups} groups"),
        ("the people document", document_s, f"{len(document['groups'])} groups, {len(document['users'])} users"),
        (f"plan rows, {hosts} hosts, no record", fresh_s, f"{len(fresh)} rows of {fresh[0].detail.count('; ') + 1} items"),
        (f"plan rows, {hosts} hosts, one user added since", again_s, f"{len(again)} rows: {again[0].detail}"),
        ("the module's check and commands on a host with none of them", module_s, f"{len(steps)} commands"),
    ]


def section(rows: list[tuple[str, float, str]], users: int, hosts: int) -> str:
    total = rows[0][1] + rows[1][1] + rows[2][1]
    lines = [SECTION, "", f"`.venv/bin/python benchmarks/people_plan.py --write`: median of 5 runs in one process. "
             f"Machine: {machine()}.", "", "| step | wall | what |", "|---|---|---|"]
    lines += [f"| {what} | {seconds:.3f} s | {detail} |" for what, seconds, detail in rows]
    verdict = "met" if total <= PLAN_GOAL_S else "NOT met"
    lines += ["", f"`plan`'s share for {users} users on {hosts} hosts (load, document, rows without a record; host "
              f"probes excluded): {total:.2f} s against <= {PLAN_GOAL_S:.0f} s: {verdict}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=50)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--write", action="store_true", help="replace the subsection in docs/benchmarks.md")
    options = parser.parse_args()
    text = section(measure(options.users, options.groups, options.hosts), options.users, options.hosts)
    print(text)
    if options.write:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text, PARENT))


if __name__ == "__main__":
    main()
