"""cluster-cli smoke on the deployed local cluster: every CPU check passes with a real figure,
the reports validate, and a node taken down makes the right check fail with a useful reason."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import time
from xml.etree import ElementTree
from pathlib import Path

import jsonschema
import pytest

from cluster_cli.loader import load_cluster
from cluster_cli.smoke import REPORT_SCHEMA, run_smoke
from cluster_cli.smoke_control.inventory_targets import smoke_target
from deployed import REPO, DeployedCluster

pytestmark = [pytest.mark.deploy, pytest.mark.smoke]

NEED_REAL_GPU = {"gpu"}


def test_full_smoke_suite_passes(deployed_cluster: DeployedCluster, tmp_path: Path) -> None:
    report_path, junit_path = tmp_path / "smoke.json", tmp_path / "smoke.xml"
    completed = deployed_cluster.cli(
        "smoke", str(deployed_cluster.inventory), "--json", str(report_path), "--junit", str(junit_path), timeout=1200
    )
    print(completed.stdout[-5000:])
    assert completed.returncode == 0, completed.stdout[-6000:] + completed.stderr[-3000:]
    report = json.loads(report_path.read_text())
    jsonschema.validate(report, REPORT_SCHEMA)
    verdicts = {check["name"]: check for check in report["checks"]}
    for name, check in verdicts.items():
        if name in NEED_REAL_GPU:
            assert check["verdict"] == "skip" and check["reason"], check
        else:
            assert check["verdict"] == "pass", f"{name}: {check['reason']}\n{check.get('output_tail')}"
    for name in ("allreduce", "ddp", "fsdp", "mpi"):
        assert verdicts[name]["figure"] and verdicts[name]["figure"] > 0, verdicts[name]
    suite = ElementTree.parse(junit_path).getroot()
    cases = suite.iter("testcase")
    assert {case.get("name") for case in cases} >= set(verdicts)


def test_node_down_fails_the_srun_check_with_the_node_named(deployed_cluster: DeployedCluster) -> None:
    down = ["scontrol", "update", "NodeName=node3", "State=DOWN", "Reason=smoke-test-broken-node"]
    subprocess.run(down, check=True, timeout=30)
    try:
        completed = deployed_cluster.cli("smoke", str(deployed_cluster.inventory), "--only", "srun", "--timeout", "60")
    finally:
        subprocess.run(["scontrol", "update", "NodeName=node3", "State=RESUME"], check=True, timeout=30)
    assert completed.returncode == 1, completed.stdout[-3000:]
    assert "node3" in completed.stdout, completed.stdout[-3000:]


# The real all_reduce job, then one rank dies in its teardown (before: the results are not there).
CRASH_AROUND_RESULT = """
import os

import allreduce_measured
import trainlib


def main():
    if os.environ["RANK"] == "1" and os.environ.get("CRASH") == "before":
        os.abort()
    allreduce_measured.main()  # measures, rank 0 writes the complete result, the group is left
    if os.environ["RANK"] == "1":
        os.abort()


trainlib.run(main)
"""


@pytest.mark.parametrize(("crash", "verdict"), [("after", "pass"), ("before", "fail")])
def test_a_crash_after_complete_results_warns_and_before_them_fails(
    deployed_cluster: DeployedCluster, tmp_path: Path, crash: str, verdict: str
) -> None:
    training = tmp_path / "training"
    shutil.copytree(REPO / "training", training, ignore=shutil.ignore_patterns("__pycache__"))
    (training / "allreduce.py").rename(training / "allreduce_measured.py")
    (training / "allreduce.py").write_text(CRASH_AROUND_RESULT)
    target = dataclasses.replace(
        smoke_target(load_cluster(deployed_cluster.inventory)),
        training_dir=training,
        job_args=[f"--export=ALL,CRASH={crash}"],
    )
    result = run_smoke(target, only=["allreduce"]).result("allreduce")
    assert result.verdict.value == verdict, f"{result.reason}\n{result.output_tail}"
    if crash == "after":
        assert any("allreduce.py exited" in text and "complete result" in text for text in result.warnings)
        assert result.figure and result.output_tail and "SIGABRT" in result.output_tail
    else:
        assert result.warnings == [] and "no all_reduce result" in result.reason


def _srun_exit(*args: str) -> tuple[int, str]:
    done = subprocess.run(["srun", *args, "true"], capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, done.stdout + done.stderr


def test_the_gpu_over_request_probe_tells_impossible_from_busy(deployed_cluster: DeployedCluster) -> None:
    # gpu-binding's over-request must be refused because it can never run, not because the nodes
    # are busy: `srun --test-only` says which; `--immediate` (used before) fails in both cases.
    hold = subprocess.run(
        ["sbatch", "--parsable", "--nodes=3", "--exclusive", "--job-name=hold", "--output=/dev/null",
         "--wrap", "sleep 120"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 60
        while "RUNNING" not in subprocess.run(["squeue", "-h", "-j", hold, "-o", "%T"], capture_output=True,
                                              text=True, timeout=30, check=False).stdout:
            assert time.monotonic() < deadline, "the holding job never started"
            time.sleep(0.5)
        assert _srun_exit("--nodes=1", "--ntasks=1", "--gpus-per-task=1", "--test-only")[0] == 0  # busy, possible
        code, output = _srun_exit("--nodes=1", "--ntasks=2", "--gpus-per-task=1", "--test-only")
        assert code != 0 and "configuration is not available" in output, output  # impossible
        assert _srun_exit("--nodes=1", "--ntasks=1", "--gpus-per-task=1", "--immediate=3")[0] != 0  # busy
    finally:
        subprocess.run(["scancel", hold], timeout=30, check=False)
