"""Smoke per partition and per node group: sampling, pinning, per-node verdicts, node fill,
typed GPU accounting, and a report grouped by partition and group.

The Slurm commands are answered by a fake session that records what it was asked; what is
tested is the checks' own logic around it (which jobs they ask for, how they judge answers).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cluster_cli.smoke import REPORT_SCHEMA, CheckResult, SmokeReport, SmokeTarget, Verdict, format_table, junit_xml
from cluster_cli.smoke.on_submit_host import target_from_dict
from cluster_cli.smoke.checks_cluster import binding_problems, gpu_identities, missing_gpu_tres
from cluster_cli.smoke.checks_nodes import check_all_nodes, check_node_fill, node_verdicts, parse_squeue_states
from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.suite_errors import NodesUnusable
from cluster_cli.smoke.registry import CHECKS
from cluster_cli.smoke.suite import choose_sample
from cluster_cli.smoke.checks_training import check_fsdp, check_preempt
from cluster_cli.smoke.slurm import Completed, JobInfo

H100_DEVICES = {"h100-1": ["/dev/fake-gpu/nvidia0", "/dev/fake-gpu/nvidia1"],
                "h100-2": ["/dev/fake-gpu/nvidia2", "/dev/fake-gpu/nvidia3"]}
ALL_FAKE = [f"/dev/fake-gpu/nvidia{index}" for index in range(5)]


class FakeSession:
    """Answers sbatch with increasing job ids, squeue with scripted lines, srun with a given output."""

    def __init__(self, squeue: list[str] | None = None, srun_stdout: str = "", srun_rc: int = 0) -> None:
        self.job_args = ["--partition=gpu"]
        self.squeue = squeue or []
        self.srun_stdout = srun_stdout
        self.srun_rc = srun_rc
        self.submitted: list[list[str]] = []
        self.envs: list[dict[str, str]] = []
        self.ran: list[list[str]] = []
        self.cancelled: list[str] = []

    def sbatch(self, args: Sequence[str], cwd: Path, env: dict[str, str] | None = None, **_: Any) -> str:
        self.submitted.append(list(args))
        self.envs.append(dict(env or {}))
        return str(100 + len(self.submitted))

    def wait(self, job_id: str, timeout: float, **_: Any) -> JobInfo:
        return JobInfo(job_id, [{"JobState": "FAILED", "ExitCode": "1:0"}])

    def run(self, argv: Sequence[str], timeout: float, **_: Any) -> Completed:
        self.ran.append(list(argv))
        if argv[0] == "squeue":
            return Completed(list(argv), 0, self.squeue.pop(0) if len(self.squeue) > 1 else self.squeue[0], "", 0.1)
        return Completed(list(argv), self.srun_rc, self.srun_stdout, "", 0.1)

    def cancel(self, job_id: str, *_: Any, **__: Any) -> Completed:
        self.cancelled.append(job_id)
        return Completed(["scancel", job_id], 0, "", "", 0.0)


class DirContext(CheckContext):
    """A context whose check directories are plain paths (no run directory needed)."""

    def check_dir(self, check: str) -> Path:
        return Path("/run-dir") / (self.prefix + check)


def group_target(**changes: Any) -> SmokeTarget:
    values: dict[str, Any] = {
        "nodes": ["h100-1", "h100-2"], "work_dir": Path("/srv/w"), "partition": "gpu", "scope": "group",
        "group": "h100", "gpus_per_node": 2, "gpu_type": "H100", "gres_type": "h100", "fake_gpus": True,
        "node_devices": H100_DEVICES, "gpu_device_glob": "/dev/fake-gpu/nvidia[0-9]*", "exclude_nodes": ["l4-1"],
    }
    values.update(changes)
    return SmokeTarget(**values)


def context(target: SmokeTarget, session: FakeSession, **fields: Any) -> DirContext:
    ctx = DirContext(target, session, "r1", None, Path("/t"), {})  # type: ignore[arg-type]
    ctx.every_node = list(target.nodes)
    for key, value in fields.items():
        setattr(ctx, key, value)
    return ctx


def probe(node: str, task: int, allowed: list[str], denied: list[str] = (), cvd: str | None = None) -> str:
    return json.dumps({"node": node, "task": task, "cuda_visible_devices": cvd, "allowed": list(allowed),
                       "denied": list(denied)})


# -- sampling and pinning ------------------------------------------------------------------

def test_the_sample_prefers_usable_nodes_and_keeps_node_order():
    nodes = ["g1", "g2", "g3", "g4"]
    assert choose_sample(nodes, {"g1": "drained"}, 2) == ["g2", "g3"]
    assert choose_sample(nodes, {}, 2) == ["g1", "g2"]
    assert choose_sample(nodes, {"g1": "down", "g2": "down", "g3": "down", "g4": "down"}, 1) == ["g1"]
    assert choose_sample(nodes, {"g2": "down"}, None) == nodes


def test_group_jobs_exclude_every_other_node_and_carry_the_scope_in_their_names():
    ctx = context(group_target(), FakeSession(), exclude=["l4-1", "h100-2"], prefix="gpu.h100-")
    args = ctx.job_args("sacct")
    assert "--exclude=l4-1,h100-2" in args and "--partition=gpu" in args
    assert "--job-name=smoke-r1-gpu.h100-sacct" in args
    assert not any(arg.startswith("--exclude") for arg in ctx.job_args("all-nodes", pinned=False))


def test_checks_know_their_scope_and_a_whole_target_runs_them_all():
    by_name = {check.name: check for check in CHECKS}
    partition, group = group_target(scope="partition", group=None), group_target()
    assert by_name["srun"].applies_to(partition) and not by_name["srun"].applies_to(group)
    assert by_name["gpu-binding"].applies_to(group) and not by_name["gpu-binding"].applies_to(partition)
    whole = group_target(scope="whole")
    assert all(check.applies_to(whole) for check in CHECKS)
    with pytest.raises(ValueError, match="scope"):
        group_target(scope="rack")


def test_a_list_of_targets_survives_the_trip_to_a_submit_host():
    sent = [group_target(scope="partition", group=None), group_target(sample=1)]
    back = [target_from_dict(json.loads(json.dumps(each.summary())), Path("/x/training")) for each in sent]
    assert [(each.scope, each.group, each.sample, each.exclude_nodes) for each in back] == [
        ("partition", None, None, ["l4-1"]), ("group", "h100", 1, ["l4-1"])
    ]
    assert back[1].node_devices == H100_DEVICES and back[1].training_dir == Path("/x/training")


# -- GPU identities with each node's own device files ---------------------------------------

def test_one_task_on_a_two_gpu_node_owns_its_gpu_when_the_node_devices_are_known():
    # The old false failure: the cgroup denies the other GPU, so "GPUs = denied ones" missed the owned one.
    tasks = [json.loads(probe("h100-1", 0, ["/dev/fake-gpu/nvidia0", *ALL_FAKE[2:]], ["/dev/fake-gpu/nvidia1"]))]
    assert gpu_identities(tasks) == {"h100-1": {0: ()}}
    assert gpu_identities(tasks, H100_DEVICES) == {"h100-1": {0: ("/dev/fake-gpu/nvidia0",)}}


def test_a_one_gpu_node_is_proved_by_its_own_device_file_not_the_neighbours():
    tasks = [json.loads(probe("l4-1", 0, ALL_FAKE))]
    owned = gpu_identities(tasks, {"l4-1": ["/dev/fake-gpu/nvidia4"]})
    assert owned == {"l4-1": {0: ("/dev/fake-gpu/nvidia4",)}}
    assert binding_problems(owned, 1) == []


def test_without_a_device_constraint_the_node_devices_fall_back_to_cuda_visible_devices():
    tasks = [json.loads(probe("h100-1", 0, ALL_FAKE, cvd="0")), json.loads(probe("h100-1", 1, ALL_FAKE, cvd="0"))]
    assert binding_problems(gpu_identities(tasks, H100_DEVICES), 2) == ["h100-1: tasks 0 and 1 share ['0']"]


# -- the all-nodes sweep ---------------------------------------------------------------------

def bound_tasks(node: str, devices: list[str], first: int) -> list[str]:
    return [probe(node, first + index, [device, *(d for d in ALL_FAKE if d not in devices)],
                  [other for other in devices if other != device]) for index, device in enumerate(devices)]


def test_node_verdicts_name_each_node_and_what_is_wrong_with_it():
    tasks = [json.loads(line) for line in bound_tasks("h100-1", H100_DEVICES["h100-1"], 0)]
    tasks.append(json.loads(probe("h100-2", 2, ALL_FAKE)))  # one task, no cgroup at work
    verdicts = node_verdicts(["h100-1", "h100-2", "h100-3"], tasks, 2, H100_DEVICES)
    assert verdicts["h100-1"] == "ok"
    assert verdicts["h100-2"].startswith("1 task(s) reported, expected 2")
    assert verdicts["h100-3"] == "no task reported from this node"
    assert node_verdicts(["cpu1"], [json.loads(probe("cpu1", 0, []))], 0, {}) == {"cpu1": "ok"}


def test_all_nodes_is_one_step_over_every_usable_node_and_names_the_failing_ones():
    output = "\n".join([*bound_tasks("h100-1", H100_DEVICES["h100-1"], 0), probe("h100-2", 2, ALL_FAKE)])
    session = FakeSession(srun_stdout=output)
    target = group_target(nodes=["h100-1"], sample=1)
    ctx = context(target, session, every_node=["h100-1", "h100-2", "h100-3"],
                  every_unusable={"h100-3": "drained (bad dimm)"}, exclude=["l4-1", "h100-2", "h100-3"])
    result = check_all_nodes(ctx)
    (argv,) = session.ran
    assert argv[0] == "srun" and "--nodes=2" in argv and "--nodelist=h100-1,h100-2" in argv
    assert "--ntasks=4" in argv and "--ntasks-per-node=2" in argv and "--gpus-per-task=1" in argv
    assert not any(arg.startswith("--exclude") for arg in argv)  # the sample's exclusion is not for the sweep
    assert result.verdict is Verdict.FAIL and result.figure == 1
    assert "2 of 3 node(s) failed" in result.reason
    assert "h100-3: not usable: drained (bad dimm)" in result.reason and "h100-2: 1 task(s) reported" in result.reason
    assert result.details["nodes"]["h100-1"] == "ok"


def test_all_nodes_passes_when_every_node_owns_its_gpus():
    output = "\n".join(bound_tasks("h100-1", H100_DEVICES["h100-1"], 0) + bound_tasks("h100-2", H100_DEVICES["h100-2"], 2))
    result = check_all_nodes(context(group_target(), FakeSession(srun_stdout=output)))
    assert result.verdict is Verdict.PASS and result.figure == 2
    assert "2 GPU(s) each" in result.reason


# -- node fill -----------------------------------------------------------------------------

def test_node_fill_submits_one_gpu_jobs_pinned_to_one_node_and_passes_when_all_run():
    session = FakeSession(squeue=["101|RUNNING|None\n102|PENDING|Priority", "101|RUNNING|None\n102|RUNNING|None"])
    result = check_node_fill(context(group_target(), session))
    assert len(session.submitted) == 2
    assert all("--nodelist=h100-1" in job and "--gres=gpu:h100:1" in job for job in session.submitted)
    assert result.verdict is Verdict.PASS and "2 one-GPU jobs ran at once on h100-1" in result.reason
    assert sorted(session.cancelled) == ["101", "102"]


def test_node_fill_on_cpu_nodes_fills_every_cpu_and_names_the_pending_reason(monkeypatch):
    monkeypatch.setattr("cluster_cli.smoke.checks_nodes.FILL_WAIT_MAX_S", 0.0)
    squeue = "101|RUNNING|None\n102|PENDING|Resources\n103|PENDING|Resources"
    session = FakeSession(squeue=[squeue])
    target = group_target(nodes=["cpu1"], group="cpu", gpus_per_node=0, gpu_type=None, gres_type=None,
                          cpus_per_node=4, node_devices={})
    result = check_node_fill(context(target, session))
    assert len(session.submitted) == 4 and all("--cpus-per-task=1" in job for job in session.submitted)
    assert result.verdict is Verdict.FAIL
    assert "only 1 of 4 one-CPU jobs ran at once on cpu1" in result.reason
    assert "102 PENDING (Resources)" in result.reason and "104 GONE (not in squeue)" in result.reason
    assert "DefMemPerCPU" in result.reason and len(session.cancelled) == 4


def test_node_fill_refuses_an_unusable_node_before_submitting():
    session = FakeSession()
    with pytest.raises(NodesUnusable, match="h100-1"):
        check_node_fill(context(group_target(), session, unusable_nodes={"h100-1": "down"}))
    assert session.submitted == []


def test_squeue_states_mark_jobs_it_no_longer_lists():
    assert parse_squeue_states("7|RUNNING|None\n", ["7", "8"]) == {"7": ("RUNNING", "None"),
                                                                   "8": ("GONE", "not in squeue")}


# -- typed GPU accounting --------------------------------------------------------------------

def test_typed_gpu_tres_is_required_for_a_typed_group():
    untyped_only = "billing=1,cpu=1,gres/gpu=1,mem=3G,node=1"
    assert missing_gpu_tres(untyped_only, "h100") == ["gres/gpu:h100=1"]
    assert missing_gpu_tres("cpu=1,gres/gpu:H100=1,gres/gpu=1", "h100") == []
    assert missing_gpu_tres(untyped_only, None) == []
    assert missing_gpu_tres("cpu=1,mem=3G", None) == ["gres/gpu=1"]


# -- the report, grouped ---------------------------------------------------------------------

def scoped_report() -> SmokeReport:
    results = [
        CheckResult("srun", Verdict.PASS, "ok", partition="gpu"),
        CheckResult("gpu-binding", Verdict.PASS, "ok", partition="gpu", group="h100", duration_s=1.0),
        CheckResult("sacct", Verdict.FAIL, "lacks gres/gpu:h100=1", partition="gpu", group="h100", duration_s=2.0),
        CheckResult("gpu-binding", Verdict.FAIL, "sees 0 GPU(s)", partition="gpu", group="l4"),
    ]
    target = {"user": "smoke", "scopes": [{"partition": "gpu", "group": "h100", "gpus_per_node": 2}]}
    return SmokeReport(results, "2026-11-24T13:00:00+00:00", 9.0, target, "/w/run")


def test_table_has_a_section_per_partition_and_group_and_scoped_reasons():
    lines = format_table(scoped_report()).splitlines()
    assert [line for line in lines if line.startswith("==")] == [
        "== partition gpu ==", "== partition gpu, group h100 ==", "== partition gpu, group l4 =="
    ]
    assert lines.index("== partition gpu, group l4 ==") < next(
        index for index, line in enumerate(lines) if line.startswith("gpu-binding  FAIL")
    )
    assert "sacct (gpu/h100) [fail]: lacks gres/gpu:h100=1" in lines
    assert "gpu-binding (gpu/l4) [fail]: sees 0 GPU(s)" in lines


def test_junit_has_a_testsuite_per_partition_and_group_with_its_own_properties():
    root = ET.fromstring(junit_xml(scoped_report()).split("\n", 1)[1])
    suites = {suite.attrib["name"]: suite for suite in root.findall("testsuite")}
    assert list(suites) == ["cluster-smoke.gpu", "cluster-smoke.gpu.h100", "cluster-smoke.gpu.l4"]
    h100 = suites["cluster-smoke.gpu.h100"]
    assert h100.attrib["tests"] == "2" and h100.attrib["failures"] == "1" and h100.attrib["time"] == "3.000"
    props = {p.attrib["name"]: p.attrib["value"] for p in h100.iter("property")}
    assert props["gpus_per_node"] == "2" and props["user"] == "smoke" and "scopes" not in props
    assert [case.attrib["classname"] for case in h100.findall("testcase")] == ["cluster-smoke.gpu.h100.checks"] * 2


def test_json_carries_each_result_scope_and_reads_back():
    jsonschema = pytest.importorskip("jsonschema")
    data = scoped_report().to_dict()
    jsonschema.validate(data, REPORT_SCHEMA)
    assert [(check["partition"], check["group"]) for check in data["checks"]] == [
        ("gpu", None), ("gpu", "h100"), ("gpu", "h100"), ("gpu", "l4")
    ]
    back = SmokeReport.from_dict(data)
    assert back.result("gpu-binding", group="l4").verdict is Verdict.FAIL
    assert back.result("gpu-binding").group == "h100"


def test_checkpoints_of_the_training_checks_are_the_scope_own():
    # Seen on the hetero cluster: the l4 group's preempt job resumed the h100 group's checkpoint.
    for group in ("h100", "l4"):
        session = FakeSession()
        ctx = context(group_target(group=group), session, prefix=f"gpu.{group}-")
        assert check_fsdp(ctx).verdict is Verdict.FAIL and check_preempt(ctx).verdict is Verdict.FAIL
        fsdp_env, preempt_env = session.envs
        assert fsdp_env["FSDP_CKPT_DIR"] == f"/run-dir/gpu.{group}-fsdp/checkpoint"
        assert preempt_env["PREEMPT_DIR"] == f"/run-dir/gpu.{group}-preempt/run"


# -- the runner over several scopes ------------------------------------------------------------

def test_a_run_over_scopes_gives_each_check_its_scope_sample_and_pinning(monkeypatch, tmp_path):
    from cluster_cli.smoke import suite
    from cluster_cli.smoke.slurm import User

    class QuietSession:
        def __init__(self, *args: Any, partition: str | None = None, **kwargs: Any) -> None:
            self.cwd, self.partition = None, partition

        def show_config(self) -> dict[str, str]:
            return {"ClusterName": "hetero"}

        def cancel_by_name_prefix(self, prefix: str) -> None:
            pass

    seen: list[tuple[str, str | None, str | None, list[str], list[str], str]] = []

    def record(check: Any, ctx: CheckContext) -> CheckResult:
        seen.append((check.name, ctx.session.partition, ctx.target.group, ctx.target.nodes, ctx.exclude, ctx.prefix))
        return CheckResult(check.name, Verdict.PASS, "ran")

    monkeypatch.setattr(suite, "SlurmSession", QuietSession)
    monkeypatch.setattr(suite, "ensure_user", lambda *args: (User("smoke", 0, 0, "/tmp"), False))
    monkeypatch.setattr(suite, "_unusable_nodes", lambda session, nodes: {"h100-1": "drained"})
    monkeypatch.setattr(suite, "_run_one", record)
    common = {"work_dir": tmp_path, "partition": "gpu", "torch_installed": False}
    targets = [
        SmokeTarget(nodes=["h100-1", "h100-2", "h100-3", "l4-1"], scope="partition", **common),
        SmokeTarget(nodes=["h100-1", "h100-2", "h100-3"], scope="group", group="h100", sample=1,
                    exclude_nodes=["l4-1"], gpus_per_node=2, **common),
    ]
    events: list[tuple[str, str, int, int, str]] = []
    report = suite.run_smoke(targets, ["srun", "sacct"],
                              lambda event: events.append((event.kind, event.check, event.index, event.total, event.scope)))
    assert seen == [
        ("srun", "gpu", None, ["h100-1", "h100-2", "h100-3", "l4-1"], [], "gpu-"),
        ("sacct", "gpu", "h100", ["h100-2"], ["l4-1", "h100-1", "h100-3"], "gpu.h100-"),
    ]
    assert [(result.name, result.partition, result.group) for result in report.results] == [
        ("srun", "gpu", None), ("sacct", "gpu", "h100")
    ]
    assert events[-1] == ("finish", "sacct", 1, 2, "gpu/h100")
    assert report.target["partitions"] == ["gpu"] and report.target["cluster"] == "hetero"
    assert [scope["group"] for scope in report.target["scopes"]] == [None, "h100"]
