"""Benchmark: `plan` and a converged `deploy`, on the local cluster and for a 10,000-node inventory.

    python benchmarks/plan_day2.py                  # writes docs/benchmarks.md's "## Day 2" section
    python benchmarks/plan_day2.py --no-write --runs 3
    python benchmarks/plan_day2.py --skip-local     # only the 10,000-node comparison

Local cluster (needs the deployed local cluster, `make cluster`): `cluster-cli plan` and
`cluster-cli deploy` of inventories/local/inventory.yaml, each as a whole process (interpreter
start-up, load, render, probe, compare), wall time and the CPU time of the process.

10,000 nodes (benchmarks/render_10k.py's inventory, 10,003 managed hosts): the comparison of
the rendered files and the inventory with one answer per host, the host probes excluded: every
host answers as a converged host would (the probes themselves run in parallel on the hosts). A
second case has every host still holding the previous slurm.conf (a partition change), so every
host's answer goes through the restart/reconfigure rule.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import render_10k  # the 10,000-node inventory and the machine facts

from cluster_cli.cluster import resolve
from cluster_cli.deployed import DeployedRecord
from cluster_cli.host_files import files_by_host, sha256_text
from cluster_cli.plan import make_plan
from cluster_cli.probe import HostProbe
from cluster_cli.render import render_configs
from cluster_cli.render.health_conf import with_host_health_texts

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
HEADING = "## Day 2: plan and a converged deploy"
LOCAL_INVENTORY = REPO / "inventories" / "local" / "inventory.yaml"
VERSION = "22.05.8-4+deb12u3"
GOALS = {"plan-local": 2.0, "deploy-local": 5.0, "plan-10k": 1.0, "plan-10k-changed": 1.0, "plan-10k-whole": 1.0}


def converged_answers(cluster, files, change_slurm_conf: str | None = None) -> dict[str, HostProbe]:
    """One answer per host, as the probe agent writes it for a host that holds ``files``."""
    answers = {}
    for name, host in cluster.hosts.items():
        held = {item.path: ({"sha256": item.sha256} if item.sha256 else {"absent": True}) for item in files[name]}
        if change_slurm_conf is not None:
            path = f"{cluster.inventory.slurm.paths.conf_dir}/slurm.conf"
            held[path] = {"sha256": sha256_text(change_slurm_conf), "text": change_slurm_conf}
        daemons = {f"slurmd@{node.name}": {"pid": 2, "started": 1.0, "running": True} for node in host.slurmd_nodes}
        if "controller" in host.roles:
            daemons["slurmctld"] = {"pid": 1, "started": 1.0, "running": True}
        if "database" in host.roles:
            daemons["slurmdbd"] = {"pid": 1, "started": 1.0, "running": True}
        packages: dict[str, str | None] = {package: VERSION for package in ("slurm-client", "slurmctld", "slurmd", "slurmdbd")}
        packages["munge"] = "0.5.15-2+deb12u1"
        controller = None
        if name == cluster.inventory.controllers.primary:
            controller = {"state_cluster_name": cluster.name, "error": None, "jobs": [],
                          "nodes": [{"name": node.name, "state": "idle", "reason": "none", "user": "Unknown",
                                     "time": "Unknown"} for node in cluster.nodes]}
        answers[name] = HostProbe(name, held, daemons, packages, controller)
    return answers


def from_text(text: str):
    """Inventory text to what a plan compares: parse, validate, resolve, render, the files per host."""
    inventory, source = render_10k.parse_and_validate(text)
    cluster = resolve(inventory, source, "bench.yaml")  # type: ignore[arg-type]
    files = render_configs(cluster, render_10k.PASSWORD)
    rendered = with_host_health_texts({item.path: item.content for item in files}, cluster)
    return cluster, rendered, files_by_host(cluster, rendered, b"k" * 1024)


def time_10k(runs: int) -> dict[str, list[tuple[float, float]]]:
    text = render_10k.inventory_text()
    cluster, rendered, files = from_text(text)
    previous = re.sub(r"MaxTime=\S+", "MaxTime=00:30:00", rendered["slurm/slurm.conf"], count=1)
    cases = {"plan-10k": converged_answers(cluster, files), "plan-10k-changed": converged_answers(cluster, files, previous)}
    results: dict[str, list[tuple[float, float]]] = {key: [] for key in cases}
    for key, answers in cases.items():
        for _ in range(runs):
            wall, cpu = time.perf_counter(), time.process_time()
            plan = make_plan(cluster, files, rendered, answers, DeployedRecord())
            results[key].append((time.perf_counter() - wall, time.process_time() - cpu))
        expected_changes = 0 if key == "plan-10k" else len(cluster.hosts)
        assert sum(1 for change in plan.changes if change.impact.value == "file change") == expected_changes, key
    results["plan-10k-whole"] = []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        cluster, rendered, files = from_text(text)
        make_plan(cluster, files, rendered, cases["plan-10k"], DeployedRecord())
        results["plan-10k-whole"].append((time.perf_counter() - wall, time.process_time() - cpu))
    return results


def time_cli(args: list[str], runs: int) -> list[tuple[float, float]]:
    samples = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "cluster_cli", *args], cwd=REPO, capture_output=True, text=True,
                              check=False)
        elapsed = time.perf_counter() - wall
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"cluster-cli {' '.join(args)} exited {done.returncode}: the local cluster is not "
                             f"converged or not deployed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        samples.append((elapsed, cpu))
    return samples


def row(label: str, key: str, samples: list[tuple[float, float]]) -> str:
    walls = [wall for wall, _ in samples]
    cpu = statistics.median(cpu for _, cpu in samples)
    median = statistics.median(walls)
    verdict = "meets" if median <= GOALS[key] else "misses"
    return (f"| {label} | {median:.2f} s | {min(walls):.2f} s | {max(walls):.2f} s | {cpu:.2f} s | "
            f"<= {GOALS[key]:.0f} s: {verdict} |")


def section(results: dict[str, list[tuple[float, float]]], runs: int, host: dict[str, str]) -> str:
    labels = {
        "plan-local": "`cluster-cli plan` of the converged local cluster (whole process)",
        "deploy-local": "`cluster-cli deploy` of the converged local cluster (whole process, 0 changes, no playbook)",
        "plan-10k": "plan for 10,000 nodes / 10,003 hosts, converged (host probes excluded)",
        "plan-10k-changed": "plan for 10,000 nodes, every host holding the previous slurm.conf (host probes excluded)",
        "plan-10k-whole": "the same converged plan from the inventory text: parse, validate, resolve, render, compare",
    }
    lines = [
        HEADING, "",
        f"`python benchmarks/plan_day2.py` (median of {runs} runs).", "",
        "| what | wall median | wall min | wall max | CPU median | goal |", "|---|---|---|---|---|---|",
    ]
    lines += [row(labels[key], key, samples) for key, samples in results.items()]
    lines += [
        "",
        f"Machine: {host['nproc']} CPUs (`nproc`), {host['memory']} memory, {host['cpu']}; {host['python']}; "
        f"measured {host['date']}, load average {host['load']} (1, 5, 15 min) while it ran.",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    current = DOC.read_text(encoding="utf-8")
    pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    updated = (pattern.sub(lambda _: text.rstrip("\n") + "\n\n", current, count=1) if pattern.search(current)
               else current.rstrip("\n") + "\n\n" + text)
    DOC.write_text(updated.rstrip("\n") + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print, leave docs/benchmarks.md alone")
    parser.add_argument("--skip-local", action="store_true", help="only the 10,000-node comparison")
    options = parser.parse_args(argv)
    results: dict[str, list[tuple[float, float]]] = {}
    if not options.skip_local:
        results["plan-local"] = time_cli(["plan", str(LOCAL_INVENTORY)], options.runs)
        results["deploy-local"] = time_cli(["deploy", str(LOCAL_INVENTORY)], options.runs)
    results |= time_10k(options.runs)
    host = render_10k.machine()
    host["load"] = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    text = section(results, options.runs, host)
    print(text)
    if not options.no_write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
