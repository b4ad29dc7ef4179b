"""Deploy benchmark on this machine: cold deploy, no-op re-deploy, smoke suite, teardown.

    sudo .venv/bin/python benchmarks/deploy_local.py [--cold] [--write]

--cold first tears the local cluster down with --purge and purges the Debian packages the roles
install, so the deploy fetches them from the registry again (destructive: only on a test
machine). --write replaces the "Deploy and smoke: local cluster" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # devtools
from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
INVENTORY = REPO / "inventories" / "local" / "inventory.yaml"
BENCHMARKS = REPO / "docs" / "benchmarks.md"
SECTION = "## Deploy and smoke: local cluster"
PACKAGES = ["slurmctld", "slurmd", "slurmdbd", "slurm-client", "slurm-wlm-basic-plugins", "munge", "mariadb-server"]


def cli(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "cluster_cli", *args], cwd=REPO, capture_output=True, text=True, check=False
    )
    return time.monotonic() - started, completed


def must(label: str, result: tuple[float, subprocess.CompletedProcess[str]]) -> float:
    elapsed, completed = result
    if completed.returncode != 0:
        sys.stderr.write(completed.stdout[-4000:] + completed.stderr[-2000:])
        raise SystemExit(f"{label} failed (exit {completed.returncode})")
    print(f"{label}: {elapsed:.1f} s", flush=True)
    return elapsed


def machine() -> str:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
        platform.processor(),
    )
    memory_kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")))
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return (
        f"{os.cpu_count()} CPUs, {memory_kib / 1024 / 1024:.1f} GiB, {cpu}; Python {platform.python_version()}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {load}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cold", action="store_true", help="purge packages and state first (destructive)")
    parser.add_argument("--write", action="store_true", help="write the results into docs/benchmarks.md")
    options = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: it deploys system daemons")
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="cluster-cli-bench-")
    inventory = str(INVENTORY)
    if options.cold:
        cli("teardown", inventory, "--purge", "--yes", "local")  # the shipped local inventory's name
        subprocess.run(["apt-get", "purge", "-y", "-qq", *PACKAGES], check=False, capture_output=True)
        subprocess.run(["apt-get", "autoremove", "-y", "-qq"], check=False, capture_output=True)
    figures = {
        "deploy (cold)" if options.cold else "deploy": must("deploy", cli("deploy", inventory)),
        "no-op re-deploy": must("no-op re-deploy", cli("deploy", inventory)),
        "check --diff (converged)": must("check --diff", cli("deploy", inventory, "--check", "--diff")),
    }
    report_path = Path(os.environ["XDG_STATE_HOME"]) / "smoke.json"
    figures["smoke suite"] = must("smoke", cli("smoke", inventory, "--json", str(report_path)))
    report = json.loads(report_path.read_text())
    figures["teardown"] = must("teardown", cli("teardown", inventory))
    lines = [
        SECTION,
        "",
        "`sudo .venv/bin/python benchmarks/deploy_local.py"
        + (" --cold" if options.cold else "")
        + " --write`: `inventories/local/inventory.yaml` (slurmctld, MariaDB + slurmdbd, 3 slurmd, training venv)."
        + (" Cold: Debian packages purged first and fetched from the registry again." if options.cold else ""),
        "",
        "| step | wall | goal |",
        "|---|---|---|",
    ]
    goals = {"deploy (cold)": "<= 5 min", "no-op re-deploy": "<= 30 s", "smoke suite": "<= 3 min"}
    lines += [f"| {name} | {seconds:.1f} s | {goals.get(name, '')} |" for name, seconds in figures.items()]
    lines += ["", "Smoke checks (verdict, time):", ""]
    lines += [f"- {check['name']}: {check['verdict']}, {check['duration_s']:.1f} s" for check in report["checks"]]
    lines += ["", f"Machine: {machine()}.", ""]
    text = "\n".join(lines)
    print(text)
    if options.write:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text))


if __name__ == "__main__":
    main()
