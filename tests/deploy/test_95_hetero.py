"""A heterogeneous cluster on this machine (inventories/examples/hetero-local.yaml: two GPU types,
two GPUs and one per node, CPU-only nodes, three overlapping partitions, a tree topology),
deployed after the local cluster's teardown (test_90) and purged at the end."""

from __future__ import annotations

import json
import os
import subprocess
from xml.etree import ElementTree
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from cluster_cli.smoke import REPORT_SCHEMA

from deployed import REPO, DeployedCluster, deploy_fresh

pytestmark = pytest.mark.deploy

HETERO_INVENTORY = REPO / "inventories" / "examples" / "hetero-local.yaml"
HETERO_PORTS = (6817, 6819, 17011, 17012, 17021, 17031, 17032)
GROUP_NODES = {"h100": {"h100-1", "h100-2"}, "l4": {"l4-1"}, "cpu": {"cpu1", "cpu2"}}
SCOPES = {("gpu", None), ("gpu", "h100"), ("gpu", "l4"), ("h100", None), ("h100", "h100"), ("cpu", None), ("cpu", "cpu")}
# The torch training checks run on every group only with CLUSTER_CLI_TEST_HETERO_FULL=1 (about
# 7 min more here); tests/deploy/test_50_smoke runs them on the local cluster in every CI run.
CI_CHECKS = "srun,gpu-binding,job-array,dependency,salloc,pty,kill-on-bad-exit,sacct,node-fill"


@pytest.fixture(scope="module")
def hetero(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployedCluster]:
    cluster = deploy_fresh(HETERO_INVENTORY, HETERO_PORTS, tmp_path_factory.mktemp("hetero-state"))
    yield cluster
    done = cluster.cli("teardown", str(HETERO_INVENTORY), "--purge", "--yes", "hetero",
                       "--backup-dir", str(tmp_path_factory.mktemp("hetero-backup")), timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.fixture(scope="module")
def smoke_report(hetero: DeployedCluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    """One smoke run over every partition and group (the default with several partitions)."""
    directory = tmp_path_factory.mktemp("hetero-smoke")
    report_path, junit_path = directory / "smoke.json", directory / "smoke.xml"
    only = [] if os.environ.get("CLUSTER_CLI_TEST_HETERO_FULL") == "1" else ["--only", CI_CHECKS]
    done = hetero.cli("smoke", str(hetero.inventory), *only, "--all-nodes", "--json", str(report_path),
                      "--junit", str(junit_path), timeout=1800)
    print(done.stdout[-6000:])
    assert report_path.exists(), done.stdout[-4000:] + done.stderr[-2000:]
    return json.loads(report_path.read_text()), junit_path, done.stdout + f"\n(exit {done.returncode})"


def test_smoke_passes_on_every_partition_and_node_group(smoke_report: tuple[dict, Path, str]) -> None:
    report, junit_path, output = smoke_report
    jsonschema.validate(report, REPORT_SCHEMA)
    failed = [f"{c['partition']}/{c['group']} {c['name']}: {c['reason']}" for c in report["checks"] if c["verdict"] == "fail"]
    assert not failed, "\n".join(failed) + output[-3000:]
    assert output.endswith("(exit 0)"), output[-3000:]
    assert {(check["partition"], check["group"]) for check in report["checks"]} == SCOPES
    suites = {suite.get("name") for suite in ElementTree.parse(junit_path).getroot().iter("testsuite")}
    assert suites == {".".join(["cluster-smoke", partition] + ([group] if group else [])) for partition, group in SCOPES}


def _results(report: dict, name: str) -> dict[tuple[str, str | None], dict]:
    return {(check["partition"], check["group"]): check for check in report["checks"] if check["name"] == name}


def test_each_group_is_tested_with_its_own_gpus_and_every_node_is_reached(smoke_report: tuple[dict, Path, str]) -> None:
    report = smoke_report[0]
    binding = _results(report, "gpu-binding")
    figures = {scope: check["figure"] for scope, check in binding.items() if check["verdict"] == "pass"}
    assert figures == {("gpu", "h100"): 4, ("gpu", "l4"): 1, ("h100", "h100"): 4}, binding
    assert binding[("cpu", "cpu")]["verdict"] == "skip"
    for (_, group), check in _results(report, "all-nodes").items():
        assert check["verdict"] == "pass" and set(check["details"]["nodes"]) == GROUP_NODES[group], check


def test_one_gpu_and_one_cpu_jobs_share_a_node_and_accounting_counts_gpus_by_type(
    smoke_report: tuple[dict, Path, str],
) -> None:
    report = smoke_report[0]
    fill = _results(report, "node-fill")
    assert "2 one-GPU jobs ran at once" in fill[("h100", "h100")]["reason"], fill
    assert "2 one-CPU jobs ran at once" in fill[("cpu", "cpu")]["reason"], fill
    sacct = _results(report, "sacct")
    assert "gres/gpu:h100=1" in sacct[("h100", "h100")]["reason"], sacct
    assert "gres/gpu:l4=1" in sacct[("gpu", "l4")]["reason"], sacct


def test_a_drained_node_fails_the_all_node_checks_by_name(hetero: DeployedCluster) -> None:
    subprocess.run(["scontrol", "update", "NodeName=h100-2", "State=DRAIN", "Reason=test-95-admin"], check=True)
    try:
        done = hetero.cli("smoke", str(hetero.inventory), "--partition", "h100", "--all-nodes",
                          "--only", "srun,gpu-binding", "--sample", "1", timeout=600)
    finally:
        subprocess.run(["scontrol", "update", "NodeName=h100-2", "State=RESUME"], check=True)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "h100-2" in done.stdout and "drained" in done.stdout, done.stdout[-3000:]


def _reasons() -> dict[str, str]:
    lines = subprocess.run(["sinfo", "-h", "-N", "-o", "%N|%E"], capture_output=True, text=True, check=True).stdout
    return dict(line.split("|", 1) for line in lines.splitlines())


def _health(hetero: DeployedCluster) -> tuple[int, dict[str, dict]]:
    done = hetero.cli("health", str(hetero.inventory), "--json", timeout=300)
    return done.returncode, {node["node"]: node for node in json.loads(done.stdout)["nodes"]}


def test_the_health_check_drains_a_broken_node_with_evidence_resumes_it_repaired_and_never_an_admin_drain(
    hetero: DeployedCluster,
) -> None:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    assert "/usr/local/sbin/cluster-cli-health" in config
    code, nodes = _health(hetero)
    assert code == 0 and all(node["passed"] for node in nodes.values()) and set(nodes) == set().union(*GROUP_NODES.values())
    device, aside = Path("/dev/fake-gpu/nvidia4"), Path("/dev/fake-gpu/moved-aside-nvidia4")
    subprocess.run(["scontrol", "update", "NodeName=cpu1", "State=DRAIN", "Reason=admin: keep out"], check=True)
    device.rename(aside)
    try:
        code, nodes = _health(hetero)
        assert code == 1 and [name for name, node in nodes.items() if not node["passed"]] == ["l4-1"], nodes
        reasons = _reasons()
        assert reasons["l4-1"] == "cluster-cli health: gpu /dev/fake-gpu/nvidia4 missing", reasons
        assert reasons["cpu1"] == "admin: keep out", reasons
        assert all(reasons[name] == "none" for name in ("h100-1", "h100-2", "cpu2")), reasons
    finally:
        aside.rename(device)
    try:
        code, nodes = _health(hetero)
        assert code == 0 and all(node["passed"] for node in nodes.values()), nodes
        reasons = _reasons()
        assert reasons["l4-1"] == "none" and reasons["cpu1"] == "admin: keep out", reasons
    finally:
        subprocess.run(["scontrol", "update", "NodeName=cpu1", "State=RESUME"], check=True)
