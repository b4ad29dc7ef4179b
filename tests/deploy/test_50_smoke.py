"""cluster-cli smoke on the deployed local cluster: every CPU check passes with a real figure,
the reports validate, and a node taken down makes the right check fail with a useful reason."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import jsonschema
import pytest

from cluster_cli.smoke import REPORT_SCHEMA
from deployed import DeployedCluster

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
    for name in ("allreduce", "ddp", "fsdp"):
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
