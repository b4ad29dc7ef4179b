"""Training verdicts rest on the results a job wrote, not on how its processes ended."""

from __future__ import annotations

from pathlib import Path

from cluster_cli.smoke import checks_training
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.slurm import JobInfo


def job(state: str, exit_code: str = "0:0") -> JobInfo:
    return JobInfo("22", [{"JobState": state, "ExitCode": exit_code, "Reason": "None"}])


def passed() -> CheckResult:
    return CheckResult("ddp", Verdict.PASS, "loss fell, ranks agree")


def output(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "slurm-22.out"
    path.write_text(text)
    return path


def test_complete_results_of_a_clean_job_pass_without_warnings(tmp_path):
    result = checks_training._on_evidence("ddp", job("COMPLETED"), output(tmp_path, "ok\n"), True, "x", passed)
    assert result.verdict is Verdict.PASS and result.warnings == [] and result.output_tail is None


def test_a_job_that_failed_after_complete_results_passes_with_a_warning_and_its_log(tmp_path):
    log = output(tmp_path, "training done\nterminate called without an active exception\n")
    result = checks_training._on_evidence("ddp", job("FAILED", "143:0"), log, True, "missing", passed)
    assert result.verdict is Verdict.PASS
    assert result.warnings == [
        "job 22 ended FAILED (exit 143:0) after its results were complete: judged on the results; "
        "the log shows how it ended"
    ]
    assert result.output_tail is not None and "terminate called" in result.output_tail


def test_the_launchers_teardown_lines_become_warnings(tmp_path):
    log = output(
        tmp_path,
        "launch: ddp.py\n"
        f"{checks_training.TEARDOWN_WARNING} ddp.py exited 134 after writing its complete result /r.json\n",
    )
    result = checks_training._on_evidence("ddp", job("COMPLETED"), log, True, "missing", passed)
    assert result.verdict is Verdict.PASS
    assert result.warnings == ["ddp.py exited 134 after writing its complete result /r.json"]


def test_without_complete_results_the_jobs_end_is_the_failure(tmp_path):
    log = output(tmp_path, "Root Cause (first observed failure):\nrank 1 exploded\n")
    result = checks_training._on_evidence("ddp", job("FAILED", "1:0"), log, False, "missing DDP result(s)", passed)
    assert result.verdict is Verdict.FAIL
    assert result.reason == "job 22 ended FAILED (exit 1:0): missing DDP result(s)"
    assert result.output_tail is not None and "rank 1 exploded" in result.output_tail


def test_a_failing_judgement_stays_a_failure_on_a_clean_job(tmp_path):
    def failed() -> CheckResult:
        return CheckResult("ddp", Verdict.FAIL, "parameters differ across ranks")

    result = checks_training._on_evidence("ddp", job("COMPLETED"), output(tmp_path, "x\n"), True, "m", failed)
    assert result.verdict is Verdict.FAIL and result.reason == "parameters differ across ranks"
