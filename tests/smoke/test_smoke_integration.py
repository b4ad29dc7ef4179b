"""run_smoke against a real Slurm cluster (marked ``smoke``); skips with the reason when there is none.

Point it at a cluster with environment variables:

    SMOKE_NODES          node names as a hostlist, e.g. node[1-3] (required unless SMOKE_DEVCLUSTER=1)
    SMOKE_WORK_DIR       directory shared by every node (default /tmp/cluster-smoke)
    SMOKE_SLURM_CONF     slurm.conf for the client commands (default: Slurm's own lookup)
    SMOKE_PARTITION      partition (default: the cluster's default)
    SMOKE_GPUS_PER_NODE  GPUs per node (default 0); SMOKE_FAKE_GPUS=1 for fake device files;
    SMOKE_GPU_GLOB       where the GPU device files are; SMOKE_GPU_TYPE (H100, H200, ...)
    SMOKE_PYTHON         python with torch that the test user can execute on the nodes
    SMOKE_ACCOUNTING=1   slurmdbd accounting is configured; SMOKE_USER (default smoke)

or let it start a private 3-node instance with fake GPUs (tests/smoke/devcluster.py: root and the
Debian slurmctld/slurmd/munge packages; ports 7850-7899) with SMOKE_DEVCLUSTER=1.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster_cli import hostlist
from cluster_cli.smoke import (
    REPORT_SCHEMA,
    SmokeTarget,
    Verdict,
    format_table,
    run_smoke,
    write_json,
    write_junit,
)

pytestmark = pytest.mark.smoke

# Checks that may skip, and the words their reason must contain when they do.
ALLOWED_SKIPS = {
    "sacct": "accounting is off",
    "gpu": "",
    "gpu-binding": "no GPUs configured",
}


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "yes", "true")


def _target_from_env() -> SmokeTarget:
    conf = os.environ.get("SMOKE_SLURM_CONF")
    return SmokeTarget(
        nodes=hostlist.expand(os.environ["SMOKE_NODES"]),
        work_dir=Path(os.environ.get("SMOKE_WORK_DIR", "/tmp/cluster-smoke")),
        slurm_conf=Path(conf) if conf else None,
        partition=os.environ.get("SMOKE_PARTITION") or None,
        gpus_per_node=int(os.environ.get("SMOKE_GPUS_PER_NODE", "0")),
        gpu_type=os.environ.get("SMOKE_GPU_TYPE") or None,
        fake_gpus=_env_flag("SMOKE_FAKE_GPUS"),
        gpu_device_glob=os.environ.get("SMOKE_GPU_GLOB", "/dev/nvidia[0-9]*"),
        accounting_enabled=_env_flag("SMOKE_ACCOUNTING"),
        user=os.environ.get("SMOKE_USER", "smoke"),
        python=os.environ.get("SMOKE_PYTHON", "python3"),
    )


def _unreachable(target: SmokeTarget) -> str | None:
    if shutil.which("scontrol") is None:
        return "the Slurm client commands are not installed"
    env = {**os.environ, **({"SLURM_CONF": str(target.slurm_conf)} if target.slurm_conf else {})}
    done = subprocess.run(
        ["scontrol", "ping"], capture_output=True, text=True, env=env, timeout=30, check=False
    )
    if done.returncode != 0 or "UP" not in done.stdout:
        return f"slurmctld not reachable ({target.slurm_conf or 'default slurm.conf'}): {done.stdout or done.stderr}"
    return None


def _devcluster_missing() -> str | None:
    if os.geteuid() != 0:
        return "SMOKE_DEVCLUSTER=1 needs root (it starts munged, slurmctld and slurmd)"
    missing = [
        path
        for path in ("/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged")
        if not Path(path).exists()
    ]
    return f"SMOKE_DEVCLUSTER=1 needs the Debian Slurm packages; missing {missing}" if missing else None


@pytest.fixture(scope="module")
def smoke_target() -> Iterator[SmokeTarget]:
    if _env_flag("SMOKE_DEVCLUSTER"):
        if (reason := _devcluster_missing()) is not None:
            pytest.skip(reason)
        import devcluster

        root = Path(tempfile.mkdtemp(prefix="smokedev-", dir="/tmp"))
        cluster = devcluster.start(root, nodes=3, gpus_per_node=2, prefix="smt", port_base=7850)
        try:
            yield SmokeTarget(
                nodes=list(cluster.nodes),
                work_dir=root / "work",
                slurm_conf=cluster.slurm_conf,
                partition=devcluster.PARTITION,
                gpus_per_node=2,
                fake_gpus=True,
                gpu_device_glob=f"{root}/dev/nvidia[0-9]*",
                python=os.environ.get("SMOKE_PYTHON", "python3"),
                user=os.environ.get("SMOKE_USER", "smoke"),
            )
        finally:
            devcluster.stop(root, remove=True)
        return
    if "SMOKE_NODES" not in os.environ:
        pytest.skip(
            "no Slurm cluster configured: set SMOKE_NODES (and SMOKE_SLURM_CONF, SMOKE_WORK_DIR, SMOKE_PYTHON, ...) "
            "or SMOKE_DEVCLUSTER=1 to start a private one"
        )
    target = _target_from_env()
    if (reason := _unreachable(target)) is not None:
        pytest.skip(reason)
    if os.geteuid() != 0 and os.environ.get("USER") != target.user:
        pytest.skip(f"run as root or as the test user {target.user!r} (jobs are submitted as that user)")
    yield target


def test_whole_suite_passes_and_reports(smoke_target: SmokeTarget, tmp_path: Path) -> None:
    only = os.environ.get("SMOKE_ONLY", "").split(",") if os.environ.get("SMOKE_ONLY") else None
    events: list[tuple[str, str]] = []
    report = run_smoke(
        smoke_target, only=only, progress=lambda event: events.append((event.kind, event.check))
    )
    print("\n" + format_table(report))
    failures = {
        r.name: f"{r.reason}\n{r.output_tail or ''}" for r in report.results if r.verdict is Verdict.FAIL
    }
    assert not failures, failures
    for result in report.results:
        if result.verdict is Verdict.SKIP:
            assert result.name in ALLOWED_SKIPS and ALLOWED_SKIPS[result.name] in result.reason, result
        assert result.reason, result
    ran = [check for kind, check in events if kind == "finish"]
    assert ran == [result.name for result in report.results]
    assert events[0] == ("start", ran[0])

    jsonschema = pytest.importorskip("jsonschema")
    write_json(report, tmp_path / "smoke.json")
    jsonschema.validate(json.loads((tmp_path / "smoke.json").read_text()), REPORT_SCHEMA)
    jsonschema.validate(json.loads((Path(report.run_dir) / "report.json").read_text()), REPORT_SCHEMA)
    write_junit(report, tmp_path / "smoke.xml")
    suite = ET.parse(tmp_path / "smoke.xml").getroot().find("testsuite")
    assert suite is not None and suite.attrib["failures"] == "0"


def test_a_failure_says_why_with_the_evidence(smoke_target: SmokeTarget) -> None:
    # Hold KillOnBadExit to an impossible bound: the same real step now has to fail, with figures.
    strict = dataclasses.replace(smoke_target, thresholds={"kill_on_bad_exit_max_s": 0.001})
    result = run_smoke(strict, only=["kill-on-bad-exit"]).result("kill-on-bad-exit")
    assert result.verdict is Verdict.FAIL
    assert result.threshold == 0.001 and result.comparison == "<="
    assert result.figure is not None and result.figure > 0.001
    assert "step ended" in result.reason and "KillOnBadExit=" in result.reason


def test_training_without_torch_fails_fast_with_the_reason(smoke_target: SmokeTarget) -> None:
    broken = dataclasses.replace(smoke_target, python="/nonexistent/bin/python")
    report = run_smoke(broken, only=["allreduce", "fsdp"])
    for result in report.results:
        assert result.verdict is Verdict.FAIL
        assert "cannot import torch" in result.reason and "/nonexistent/bin/python" in result.reason
    assert report.duration_s < 60


CRASHING_SCRIPT = """
import trainlib


def main():
    info = trainlib.init_distributed()
    print("lots of progress output\\n" * 100, flush=True)
    if info.rank == 1:
        raise RuntimeError("rank 1 exploded on purpose")
    trainlib.shutdown()


trainlib.run(main)
"""


def test_a_crashing_job_fails_with_its_output(smoke_target: SmokeTarget, tmp_path: Path) -> None:
    broken = tmp_path / "training"
    shutil.copytree(smoke_target.training_dir, broken, ignore=shutil.ignore_patterns("__pycache__"))
    (broken / "allreduce.py").write_text(CRASHING_SCRIPT)
    report = run_smoke(dataclasses.replace(smoke_target, training_dir=broken), only=["allreduce"])
    result = report.result("allreduce")
    assert result.verdict is Verdict.FAIL
    assert result.reason.startswith(f"job {result.job_ids[0]} ended FAILED")
    assert "no all_reduce result" in result.reason
    # torchrun's Root Cause block (the worker ran under trainlib.run -> @record) names the error.
    assert result.output_tail is not None
    assert "Root Cause" in result.output_tail and "rank 1 exploded on purpose" in result.output_tail
