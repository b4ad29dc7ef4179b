"""Parsing Slurm's output and judging GPU binding evidence; check selection."""

from __future__ import annotations

import pytest

from cluster_cli.smoke import CHECK_NAMES
from cluster_cli.smoke.checks_cluster import binding_problems, gpu_identities
from cluster_cli.smoke.registry import select
from cluster_cli.smoke.suite_errors import CheckTimeout
from cluster_cli.node_states import is_responding, unusable_nodes
from cluster_cli.smoke.slurm import Completed, JobInfo, SlurmSession, parse_scontrol_record
from cluster_cli.smoke.text import excerpt, read_excerpt

# Shortened `scontrol show job -o` line of an array task (Slurm 22.05).
LINE = (
    "JobId=780029 ArrayJobId=780027 ArrayTaskId=1 JobName=my job UserId=smoke(1001) JobState=RUNNING "
    "Reason=None Requeue=1 Restarts=0 ExitCode=0:0 AllocNode:Sid=localhost:3673 "
    "TRES=cpu=1,mem=2000M,node=1,billing=1 NodeList=smk1 StdOut=/dev/null Power= "
)


def test_parse_scontrol_record_keeps_spaces_and_equals_in_values():
    record = parse_scontrol_record(LINE)
    assert record["JobName"] == "my job"
    assert record["TRES"] == "cpu=1,mem=2000M,node=1,billing=1"
    assert record["AllocNode:Sid"] == "localhost:3673"
    assert record["JobState"] == "RUNNING" and record["ArrayTaskId"] == "1"
    assert record["Power"] == ""


def test_job_info_is_finished_only_when_every_array_task_is():
    running = parse_scontrol_record(LINE)
    done = {**running, "JobState": "COMPLETED"}
    assert not JobInfo("780027", [done, running]).finished
    assert JobInfo("780027", [done, {**done, "JobState": "FAILED"}]).finished
    assert not JobInfo("1", []).finished  # unknown is not finished
    requeued = JobInfo("5", [{"JobState": "PENDING", "Restarts": "1", "Reason": "BeginTime"}])
    assert requeued.restarts == 1 and requeued.state == "PENDING" and requeued.get("Reason") == "BeginTime"
    assert not JobInfo("5", [{"JobState": "COMPLETING"}]).finished


def task(node, index, cvd, allowed=(), denied=()):
    return {
        "node": node,
        "task": index,
        "cuda_visible_devices": cvd,
        "allowed": list(allowed),
        "denied": list(denied),
    }


def test_constrained_devices_are_the_evidence_even_when_cvd_is_always_zero():
    # What Slurm 22.05 with ConstrainDevices=yes reports: CUDA_VISIBLE_DEVICES=0 in every task,
    # the device cgroup lets each task open only its own GPU (other nodes' files are not denied).
    tasks = [
        task("smk1", 0, "0", ["/d/nvidia0", "/d/nvidia2"], ["/d/nvidia1"]),
        task("smk1", 1, "0", ["/d/nvidia1", "/d/nvidia2"], ["/d/nvidia0"]),
        task("smk2", 2, "0", ["/d/nvidia0", "/d/nvidia2"], ["/d/nvidia3"]),
        task("smk2", 3, "0", ["/d/nvidia0", "/d/nvidia3"], ["/d/nvidia2"]),
    ]
    identities = gpu_identities(tasks)
    assert identities == {
        "smk1": {0: ("/d/nvidia0",), 1: ("/d/nvidia1",)},
        "smk2": {2: ("/d/nvidia2",), 3: ("/d/nvidia3",)},
    }
    assert binding_problems(identities, 2) == []


def test_shared_gpu_is_reported():
    tasks = [
        task("n1", 0, "0", ["/d/nvidia0", "/d/nvidia1"], []),
        task("n1", 1, "0", ["/d/nvidia0", "/d/nvidia1"], []),
    ]
    problems = binding_problems(gpu_identities(tasks), 2)
    assert problems == ["n1: tasks 0 and 1 share ['0']"]


def test_without_a_device_constraint_cuda_visible_devices_must_differ():
    good = [task("n1", 0, "0"), task("n1", 1, "1")]
    assert binding_problems(gpu_identities(good), 2) == []
    greedy = [task("n1", 0, "0,1"), task("n1", 1, "1")]
    problems = binding_problems(gpu_identities(greedy), 2)
    assert "n1 task 0: sees 2 GPU(s) ['0', '1'], expected exactly 1" in problems


def test_missing_tasks_and_gpu_less_tasks_are_reported():
    problems = binding_problems(gpu_identities([task("n1", 0, "")]), 2)
    assert "n1: 1 task(s) reported, expected 2" in problems
    assert "n1 task 0: sees 0 GPU(s) [], expected exactly 1" in problems


def test_select_keeps_suite_order_and_refuses_unknown_names():
    assert [check.name for check in select(["ddp", "srun"])] == ["srun", "ddp"]
    # Every check but the all-nodes sweep, which is asked for by name (smoke --all-nodes).
    assert [check.name for check in select(None)] == [name for name in CHECK_NAMES if name != "all-nodes"]
    assert [check.name for check in select(["all-nodes"])] == ["all-nodes"]
    with pytest.raises(ValueError, match="unknown check"):
        select(["srun", "bogus"])


def test_check_names_are_unique_and_cover_the_issue():
    assert len(set(CHECK_NAMES)) == len(CHECK_NAMES)
    assert {
        "srun",
        "gpu-binding",
        "job-array",
        "dependency",
        "salloc",
        "pty",
        "kill-on-bad-exit",
        "mpi",
        "qos-limit",
        "fairshare",
        "sacct",
        "node-fill",
        "all-nodes",
        "allreduce",
        "ddp",
        "container",
        "fsdp",
        "preempt",
        "shared-storage",
        "gpu",
    } == set(CHECK_NAMES)


def torchrun_output(progress_lines: int = 100) -> str:
    agent_traceback = [
        "Traceback (most recent call last):",
        *[f'  File "run.py", line {i}' for i in range(15)],
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
    ]
    root_cause = [
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : 1 (local_rank: 0)",
        "  traceback : RuntimeError: rank 1 exploded",
        "=" * 60,
    ]
    return "\n".join(
        ["launch: allreduce.py on 3 node(s)", "worker says: data file missing"]
        + [f"step {i}" for i in range(progress_lines)]
        + agent_traceback
        + ["=" * 60, "allreduce.py FAILED"]
        + root_cause
        + agent_traceback
        + agent_traceback
        + ["srun: error: smk2: task 1: Exited with exit code 1"]
    )


def test_excerpt_keeps_the_head_the_root_cause_and_the_tail():
    text = excerpt(torchrun_output(), lines=20)
    lines = text.splitlines()
    assert lines[:2] == ["launch: allreduce.py on 3 node(s)", "worker says: data file missing"]
    assert "Root Cause (first observed failure):" in lines
    assert "  traceback : RuntimeError: rank 1 exploded" in lines
    assert lines[-1] == "srun: error: smk2: task 1: Exited with exit code 1"
    assert lines.count("[...]") == 2
    assert len(lines) <= 12 + 5 + 20 + 2


def test_short_output_is_kept_whole():
    text = "\n".join(f"line {i}" for i in range(30))
    assert excerpt(text, lines=40) == text


def test_read_excerpt_of_a_missing_file_says_so(tmp_path):
    assert read_excerpt(tmp_path / "slurm-1.out").startswith("(no output: No such file or directory")


def test_unusable_nodes_names_state_and_reason():
    states = {
        "n1": ("idle", "none"),
        "n2": ("mixed", "none"),
        "n3": ("down", "smoke-test-broken-node"),
        "n4": ("drained", "maint"),
        "n5": ("idle*", "none"),  # not responding
        "n6": ("allocated", "none"),
    }
    unusable = unusable_nodes(["n1", "n2", "n3", "n4", "n5", "n6", "n7"], states)
    assert unusable == {
        "n3": "down (smoke-test-broken-node)",
        "n4": "drained (maint)",
        "n5": "idle*",
        "n7": "unknown to Slurm (not in sinfo)",
    }
    assert unusable_nodes(["n1", "n2", "n6"], states) == {}


@pytest.mark.parametrize(("state", "responding"), [
    ("idle", True), ("MIXED+DRAIN", True), ("drained", True),
    ("idle*", False), ("IDLE*", False), ("IDLE+NOT_RESPONDING", False), ("DOWN*+DRAIN", False),
])
def test_is_responding_reads_the_flag_as_sinfo_and_scontrol_write_it(state, responding):
    assert is_responding(state) is responding


def test_node_states_list_every_node_and_keep_the_ones_asked_for(monkeypatch):
    """Never `sinfo -n` of one node: slurmctld answers it from cached allocated-CPU counts, which
    can call an idle node "mixed" for minutes after a slurmctld start (issue 32)."""
    session = SlurmSession.__new__(SlurmSession)
    asked: list[list[str]] = []
    listing = "n1|idle|none\nn2|mixed|none\nn2|mixed|none\nn3|drained|admin: disk\n"

    def run(argv, timeout, cwd=None, env=None):
        asked.append(list(argv))
        return Completed(list(argv), 0, listing, "", 0.01)

    monkeypatch.setattr(session, "run", run)
    assert session.node_states(["n2"]) == {"n2": ("mixed", "none")}
    assert session.node_states(["n1", "n3", "n9"]) == {"n1": ("idle", "none"), "n3": ("drained", "admin: disk")}
    assert all("-n" not in argv and not any(a.startswith("--nodes") for a in argv) for argv in asked), asked


def test_a_poll_the_controller_is_slow_to_answer_does_not_end_the_wait(monkeypatch):
    session = SlurmSession.__new__(SlurmSession)  # no Slurm needed: the polls are stood in for
    answers = iter([CheckTimeout("scontrol show job did not finish within 30s"), "COMPLETED"])

    def job_info(job_id: str) -> JobInfo:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return JobInfo(job_id, [{"JobState": answer}])

    monkeypatch.setattr(session, "job_info", job_info)
    assert session.wait("7", timeout=60).state == "COMPLETED"


def test_past_the_deadline_an_unanswered_poll_cancels_the_job(monkeypatch):
    session = SlurmSession.__new__(SlurmSession)
    cancelled: list[str] = []

    def job_info(job_id: str):
        raise CheckTimeout("scontrol show job did not finish within 30s")

    monkeypatch.setattr(session, "job_info", job_info)
    monkeypatch.setattr(session, "cancel", lambda job_id: cancelled.append(job_id))
    with pytest.raises(CheckTimeout, match="job 7: no answer within 0s; cancelled it"):
        session.wait("7", timeout=0)
    assert cancelled == ["7"]


def test_kill_on_bad_exit_times_the_step_from_the_bad_tasks_exit_not_from_srun_start():
    from cluster_cli.smoke.checks_cluster import step_end_after_bad_exit

    output = "srun: job 9 queued and waiting for resources\nbad-exit-at 1000.25\nsrun: error: task 1: Exited 3"
    assert step_end_after_bad_exit(output, ended_at=1001.5, seconds=45.0) == pytest.approx(1.25)
    assert step_end_after_bad_exit("no mark", ended_at=1001.5, seconds=45.0) == 45.0  # says so: whole run
