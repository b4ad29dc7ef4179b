"""Time a molecule scenario step by step on the multi-host test bed.

    sudo .venv/bin/python benchmarks/molecule_scenario.py [-s default|trixie|ha] [--write]

Runs the scenario's steps one molecule command at a time (destroy, create, converge,
idempotence, verify, side-effect, destroy), the same sequence as ``molecule test``, and
prints the wall time of each: create = mirror + hosts up (the test bed's own figure for
`up` is shown too), converge = first deploy, idempotence = no-op re-deploy, verify = the
testinfra checks and faults, side-effect = the smoke suite. ``--write`` puts the table in
docs/benchmarks.md under "Multi-host scenarios". A failing step stops the run (after a
destroy) with exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]  # deploy_local, devtools
from deploy_local import machine

from devtools.deploy_summary import parse_summary_line
from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
SECTION = "## Multi-host scenarios (molecule, test bed)"
STEPS = ["destroy", "create", "converge", "idempotence", "verify", "side-effect", "destroy"]
LABELS = {
    "create": "create: mirror + hosts up",
    "converge": "converge: first deploy",
    "idempotence": "idempotence: no-op re-deploy",
    "verify": "verify: testinfra, bad input, faults",
    "side-effect": "side-effect: smoke suite",
}
GOALS = {"converge": "<= 3 min", "idempotence": "<= 45 s"}


def run_step(scenario: str, step: str, env: dict[str, str], log: Path) -> tuple[float, str]:
    molecule = Path(sys.executable).parent / "molecule"
    start = time.monotonic()
    done = subprocess.run([str(molecule), step, "-s", scenario], cwd=REPO, env=env, capture_output=True,
                          text=True, check=False)
    elapsed = time.monotonic() - start
    output = done.stdout + done.stderr
    with open(log, "a") as out:
        out.write(f"===== molecule {step} -s {scenario}: exit {done.returncode}, {elapsed:.1f} s\n{output}\n")
    if done.returncode != 0:
        subprocess.run([str(molecule), "destroy", "-s", scenario], cwd=REPO, env=env, capture_output=True, check=False)
        raise SystemExit(f"molecule {step} -s {scenario} failed (exit {done.returncode}); log: {log}\n{output[-4000:]}")
    print(f"{step}: {elapsed:.1f} s", flush=True)
    return elapsed, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-s", "--scenario", default="default")
    parser.add_argument("--write", action="store_true", help="write the results into docs/benchmarks.md")
    options = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: the test bed boots systemd-nspawn hosts")
    reports = Path(tempfile.mkdtemp(prefix=f"molecule-{options.scenario}-"))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "CLUSTER_TB_REPORT_DIR": str(reports), "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0"}
    log = reports / "molecule.log"
    figures: dict[str, float] = {}
    up_seconds = None
    deploy_seconds: dict[str, str] = {}  # cluster-cli's own "Deploy: <s> s, <n> changed"
    for index, step in enumerate(STEPS):
        elapsed, output = run_step(options.scenario, step, env, log)
        if step == "create":
            found = re.search(r"up_total_seconds=([0-9.]+)", output)
            up_seconds = float(found.group(1)) if found else None
        if step in ("converge", "idempotence"):
            summary = parse_summary_line(output)
            if summary is not None:
                deploy_seconds[step] = f"{summary[0]:.1f} s, {summary[1]} changed"
        if 0 < index < len(STEPS) - 1:
            figures[step] = elapsed
    figures["destroy"] = elapsed
    smoke = json.loads((reports / "smoke.json").read_text())
    verify = (reports / "verify.xml").read_text()
    tests = re.search(r'tests="(\d+)"', verify)
    lines = [
        f"### Scenario `{options.scenario}`",
        "",
        f"`sudo .venv/bin/python benchmarks/molecule_scenario.py -s {options.scenario} --write`"
        f" (molecule/{options.scenario}; log and reports in a temporary directory).",
        "",
        "| step | wall (molecule step) | cluster-cli deploy alone | goal |",
        "|---|---|---|---|",
    ]
    for step, seconds in figures.items():
        label = LABELS.get(step, step)
        if step == "create" and up_seconds is not None:
            label += f" (`testbed up` alone: {up_seconds:.1f} s)"
        lines.append(f"| {label} | {seconds:.1f} s | {deploy_seconds.get(step, '')} | {GOALS.get(step, '')} |")
    lines += [
        "",
        f"verify: {tests.group(1) if tests else '?'} checks; smoke: {smoke['counts']}, {smoke['duration_s']:.0f} s.",
        f"Machine: {machine()}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if options.write:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text, parent=SECTION))


if __name__ == "__main__":
    main()
