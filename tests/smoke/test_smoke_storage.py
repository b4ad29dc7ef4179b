"""The shared-storage check (cluster_cli/smoke/checks_storage.py): its file-passing script, the
log it reads the nodes from, and its verdict on where the requeued training ran."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from cluster_cli.smoke import judge
from cluster_cli.smoke.checks_storage import PASS_FILE, check_shared_storage
from cluster_cli.smoke.checks_training import incarnation_nodes
from cluster_cli.smoke.report import Verdict
import smoke_fixtures as fx


def _pass_file(tmp_path: Path, node: str, *args: str) -> str:
    script = tmp_path / "pass_file.sh"
    script.write_text(PASS_FILE)
    env = {**os.environ, "SLURMD_NODENAME": node}
    done = subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def test_the_file_written_on_one_node_is_read_back_with_both_nodes_names(tmp_path):
    passed = str(tmp_path / "passed-file")
    assert _pass_file(tmp_path, "node1", "write", passed, "c0ffee") == ""
    assert not Path(passed + ".tmp").exists()  # renamed into place whole
    assert _pass_file(tmp_path, "node2", "read", passed) == "read on node2: c0ffee node1\n"


def test_the_nodes_of_each_incarnation_come_from_the_jobs_log(tmp_path):
    log = tmp_path / "slurm-6.out"
    log.write_text(
        "incarnation 0 of job 6 on node1\nlaunch: preempt.py on 1 node(s)\nincarnation 1 of job 6 on node2\n"
        "incarnation of the log, not a line of the script\n"
    )
    assert incarnation_nodes(log) == {0: "node1", 1: "node2"}
    assert incarnation_nodes(tmp_path / "missing.out") == {}


def _resumed(resumed_from: int = 5) -> judge.CheckResult:
    return judge.judge_preempt(fx.preempt(resumed_from), 1, 5, 7.2, "shared-storage")


def test_a_training_resumed_on_the_other_node_from_its_checkpoint_passes_with_no_step_repeated():
    result = judge.judge_moved_resume(_resumed(), "node1", "node2", {0: "node1", 1: "node2"})
    assert result.verdict is Verdict.PASS, result.reason
    assert result.name == "shared-storage"
    assert (result.figure, result.figure_name, result.threshold, result.comparison) == (0.0, "steps repeated", 0.0, "<=")
    assert result.reason.startswith("checkpointed on node1, resumed on node2: requeued 1x, resumed at step 5")
    assert result.details["turnaround_s"] == 7.2


def test_a_training_resumed_on_the_same_node_fails_the_check():
    result = judge.judge_moved_resume(_resumed(), "node1", "node2", {0: "node1", 1: "node1"})
    assert result.verdict is Verdict.FAIL
    assert "the last on node1; expected node1, then node2: the checkpoint did not cross nodes" in result.reason
    unlogged = judge.judge_moved_resume(_resumed(), "node1", "node2", {0: "node1"})
    assert unlogged.verdict is Verdict.FAIL and "did not cross nodes" in unlogged.reason


def test_a_resume_at_another_step_keeps_the_preempt_verdicts_reason():
    result = judge.judge_moved_resume(_resumed(3), "node1", "node2", {0: "node1", 1: "node2"})
    assert result.verdict is Verdict.FAIL
    assert result.reason == "checkpointed at step 5 but resumed at step 3"
    assert result.details["incarnation_nodes"] == {"0": "node1", "1": "node2"}


def test_the_check_skips_on_one_node_saying_why():
    assert "needs two nodes" in fx.skip_reason(check_shared_storage, nodes=["n1"])
