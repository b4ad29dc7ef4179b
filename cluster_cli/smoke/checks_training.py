"""Training checks: submit training/*.sbatch as the test user, poll, judge the result files.

Each job runs from its check directory (the sbatch scripts' submit directory), so a script's
default result path ``<check>-<jobid>.json`` lands there.

The verdict rests on the results the job wrote: rank 0 writes them after the last collective, so
a complete result proves every rank did the work. A job that then ends badly anyway (a rank
crashing in its teardown, srun cancelling the rest) is judged on its results and carries a
warning with its log; only a job without complete results fails for how it ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster_cli.smoke import judge
from cluster_cli.smoke.context import CheckContext, job_failure, read_json
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.slurm import JobInfo
from cluster_cli.smoke.text import read_excerpt, read_job_text

PREEMPT_HOLD_STEP = 5
# launch.sh prints this when a launch failed after writing its complete result.
TEARDOWN_WARNING = "teardown-warning:"
# Slurm holds a requeued job for AuthInfo cred_expire (120 s by default). To start it sooner its
# start time is set to now, but only REQUEUE_SETTLE_S after it was seen requeued: Slurm rejects a
# credential made in the same second it revoked the job's last one (slurm_cred.c: ctime <= revoked),
# and the revocation came before the job showed as requeued. A start time still in the future
# ("now+2") would wait for the next scheduling pass, 26 s on the local cluster; becoming eligible
# in the update itself, the job is scheduled at once.
REQUEUE_SETTLE_S = 1.5
REQUEUE_START = "now"


def _gpu_name(result: dict[str, Any] | None) -> str | None:
    name = (result or {}).get("env", {}).get("gpu_name")
    return str(name) if name else None


def submit(
    ctx: CheckContext, check: str, env: dict[str, str] | None = None, script_args: list[str] | None = None,
    options: list[str] | None = None, script: str | None = None, nodes: list[str] | None = None,
) -> tuple[str, Path, Path]:
    """Submit training/<script>.sbatch (default: <check>.sbatch) over every target node (or over
    ``nodes``), with sbatch ``options`` besides the check's own; returns (job id, check dir, output)."""
    work = ctx.check_dir(check)
    target = ctx.target
    placement = ctx.all_nodes_args() if nodes is None else [f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}"]
    gpus = [f"--gpus-per-node={target.gpus_per_node}"] if target.real_gpus else []
    job_env = {
        "TRAIN_PYTHON": target.python,
        "TRAINING_DIR": str(ctx.training_dir),
        "NPROC_PER_NODE": str(target.ranks_per_node),
        **(env or {}),
    }
    job = ctx.session.sbatch(
        [
            *ctx.job_args(check),
            *placement,
            "--ntasks-per-node=1",
            "--exclusive",
            "--mem=0",
            *gpus,
            *(options or []),
            f"--output={work}/slurm-%j.out",
            f"--chdir={work}",
            str(ctx.training_dir / f"{script or check}.sbatch"),
            *(script_args or []),
        ],
        cwd=work,
        env=job_env,
    )
    return job, work, work / f"slurm-{job}.out"


def _finish(result: CheckResult, job: str, output: Path) -> CheckResult:
    result.job_ids = [job]
    if (result.verdict is Verdict.FAIL or result.warnings) and result.output_tail is None:
        result.output_tail = read_excerpt(output)
    result.details.setdefault("output", str(output))
    return result


def teardown_warnings(output: Path) -> list[str]:
    """The launches that failed after writing their complete result, as launch.sh logged them."""
    try:
        text = read_job_text(output)
    except OSError:
        return []
    marked = [line for line in text.splitlines() if line.startswith(TEARDOWN_WARNING)]
    return [line.removeprefix(TEARDOWN_WARNING).strip() for line in marked]


def _on_evidence(
    check: str, info: JobInfo, output: Path, complete: bool, missing: str, judged: Callable[[], CheckResult]
) -> CheckResult:
    """Judge a finished job by its results (see the module docstring)."""
    if not complete:
        return job_failure(check, info, output, missing)
    result = judged()
    result.warnings.extend(teardown_warnings(output))
    if info.state != "COMPLETED":
        result.warnings.append(
            f"job {info.job_id} ended {info.state} (exit {info.exit_code}) after its results were "
            "complete: judged on the results; the log shows how it ended"
        )
    return _finish(result, info.job_id, output)


def _run_simple(
    ctx: CheckContext, check: str, env: dict[str, str] | None = None
) -> tuple[Path, JobInfo, dict[str, Any] | None]:
    """Submit, wait; the job's output file, its end, and the result it wrote (None without one)."""
    job, work, output = submit(ctx, check, env)
    info = ctx.session.wait(job, ctx.remaining())
    return output, info, read_json(work / f"{check}-{job}.json")


def check_allreduce(ctx: CheckContext) -> CheckResult:
    """all_reduce over every node; busbw at the largest payload against the GPU type's floor."""
    if ctx.torch_problem:
        return CheckResult("allreduce", Verdict.FAIL, ctx.torch_problem)
    output, info, result = _run_simple(ctx, "allreduce")
    return _on_evidence(
        "allreduce",
        info,
        output,
        result is not None,
        "no all_reduce result",
        lambda: judge.judge_allreduce(result or {}, ctx.thresholds(_gpu_name(result))),
    )


def check_ddp(ctx: CheckContext) -> CheckResult:
    """DDP at 1 rank, then at every rank: loss falls, ranks agree, scaling efficiency."""
    if ctx.torch_problem:
        return CheckResult("ddp", Verdict.FAIL, ctx.torch_problem)
    world = len(ctx.target.nodes) * ctx.target.ranks_per_node
    job, work, output = submit(ctx, "ddp", {"DDP_BASELINE": "1" if world > 1 else "0"})
    info = ctx.session.wait(job, ctx.remaining())
    result = read_json(work / f"ddp-{job}.json")
    baseline = read_json(work / f"ddp-{job}-1rank.json")
    return _on_evidence(
        "ddp",
        info,
        output,
        result is not None and (world == 1 or baseline is not None),
        "missing DDP result(s)",
        lambda: judge.judge_ddp(result or {}, baseline, ctx.thresholds(_gpu_name(result))),
    )


def check_fsdp(ctx: CheckContext) -> CheckResult:
    """FSDP2 training, sharded DCP checkpoint, reload equals saved."""
    if ctx.torch_problem:
        return CheckResult("fsdp", Verdict.FAIL, ctx.torch_problem)
    checkpoint = ctx.check_dir("fsdp") / "checkpoint"  # the scope's own: groups must not share one
    output, info, result = _run_simple(ctx, "fsdp", {"FSDP_CKPT_DIR": str(checkpoint)})
    return _on_evidence(
        "fsdp", info, output, result is not None, "no FSDP result", lambda: judge.judge_fsdp(result or {})
    )


def check_preempt(ctx: CheckContext) -> CheckResult:
    """Checkpoint signal -> checkpoint -> requeue -> resume at the same step -> same final weights.
    The signal comes from Slurm's preemption by a job of a higher QoS where the inventory has one
    (target.preemption), else from the runner (scancel --batch --signal=USR1)."""
    if ctx.torch_problem:
        return CheckResult("preempt", Verdict.FAIL, ctx.torch_problem)
    run_dir = ctx.check_dir("preempt") / "run"  # the scope's own: a group must not resume another's
    holding = run_dir / "holding"
    preemption = ctx.target.preemption
    qos = [f"--qos={preemption['qos']}", f"--account={preemption['account']}"] if preemption else []
    job, work, output = submit(
        ctx, "preempt", {"PREEMPT_DIR": str(run_dir)}, ["--hold-at-step", str(PREEMPT_HOLD_STEP)], qos
    )
    not_parked = parked(ctx, "preempt", job, output, holding)
    if not_parked:
        return not_parked
    preemptor = _preemptor(ctx, work, preemption) if preemption else None
    if preemptor is None:
        not_signalled = signal_checkpoint(ctx, "preempt", job, output)
        if not_signalled:
            return not_signalled
    try:
        return wait_resumed(ctx, job, output, run_dir, preemptor)
    finally:
        if preemptor:
            ctx.session.cancel(preemptor)


def parked(ctx: CheckContext, check: str, job: str, output: Path, holding: Path) -> CheckResult | None:
    """Wait until preempt.sbatch's training parks at its hold step and says so (a signal only then
    names a known step); the check's failure if the job ended first, else None."""
    info = ctx.session.wait(job, ctx.remaining(), until=lambda info: holding.exists() or info.finished)
    if holding.exists():
        return None
    return _finish(job_failure(check, info, output, "ended before reaching the hold step"), job, output)


def signal_checkpoint(ctx: CheckContext, check: str, job: str, output: Path) -> CheckResult | None:
    """USR1 to the batch shell, whose trap asks the training to checkpoint; the check's failure if
    scancel failed, else None."""
    signalled = ctx.session.cancel(job, signal_name="USR1", batch_only=True)
    if signalled.returncode == 0:
        return None
    return _finish(CheckResult(check, Verdict.FAIL, f"scancel --batch --signal=USR1 failed: {signalled.output}"),
                   job, output)


def _preemptor(ctx: CheckContext, work: Path, preemption: dict[str, str]) -> str:
    """A job of the preempting QoS that needs a node of the parked job (every target node's) whole:
    Slurm preempts the parked job for it."""
    node = ctx.target.nodes[0]
    script = ctx.write_script("preempt", "preemptor.sh", "#!/bin/bash\nhostname\n")
    return ctx.session.sbatch([
        *ctx.job_args("preempt"), f"--qos={preemption['by']}", f"--account={preemption['account']}", "--nodes=1",
        f"--nodelist={node}", "--ntasks=1", "--exclusive", "--mem=0", f"--output={work}/preemptor-%j.out",
        str(script),
    ], cwd=work)


def wait_resumed(
    ctx: CheckContext, job: str, output: Path, run_dir: Path, preemptor: str | None,
    check: str = "preempt", moved_to: str | None = None,
) -> CheckResult:
    """Wait for the requeued job to resume and finish, and judge it (and the preemptor's run).
    ``moved_to``: the node the requeued job must resume on (its required node list changed while
    it waits)."""
    signal_time = time.monotonic()
    resumed_at: list[float] = []
    moved: list[bool] = []
    expedited: list[bool] = []

    def watch(info: JobInfo) -> None:
        if info.restarts >= 1 and info.state == "RUNNING" and not resumed_at:
            resumed_at.append(time.monotonic())
        if info.restarts < 1 or info.state != "PENDING":
            return
        if moved_to and not moved:
            moved.append(_update_job(ctx, job, f"ReqNodeList={moved_to}"))
        if ctx.target.expedite_requeue and not expedited and info.get("Reason") == "BeginTime":
            time.sleep(REQUEUE_SETTLE_S)
            expedited.append(_update_job(ctx, job, f"StartTime={REQUEUE_START}"))

    info = ctx.session.wait(job, ctx.remaining(), on_poll=watch)
    checkpoint_step = _checkpoint_step(output)
    train = read_json(run_dir / "train.json")
    turnaround = resumed_at[0] - signal_time if resumed_at else None
    preempted_by = ctx.session.job_info(preemptor) if preemptor else None

    def judged() -> CheckResult:
        result = judge.judge_preempt(train, info.restarts, checkpoint_step, turnaround, check)
        result.details["expedited_requeue"] = bool(expedited and expedited[0])
        if moved_to:
            result.details["moved"] = bool(moved and moved[0])
        if preempted_by is not None:
            result = judge.judge_preemptor(result, preempted_by.job_id, preempted_by.state, ctx.target.preemption or {})
        return result

    if info.restarts < 1:  # never requeued: the judge says so, whatever the job's end
        return _finish(judged(), job, output)
    resumed = train is not None and train.get("status") == "completed" and train.get("restart_count", 0) >= 1
    return _on_evidence(check, info, output, resumed, "the resumed incarnation failed", judged)


def _update_job(ctx: CheckContext, job: str, field: str) -> bool:
    return ctx.session.run(["scontrol", "update", f"JobId={job}", field], timeout=30).returncode == 0


def _checkpoint_step(output: Path) -> int | None:
    """The step the first incarnation checkpointed at, as the sbatch script logged it."""
    try:
        text = read_job_text(output)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("checkpointed at step "):
            try:
                return int(line.split()[3].rstrip(";"))
            except (IndexError, ValueError):
                return None
    return None


def incarnation_nodes(output: Path) -> dict[int, str]:
    """The nodes each incarnation of a preempt.sbatch job ran on, as the script logged them."""
    try:
        text = read_job_text(output)
    except OSError:
        return {}
    nodes: dict[int, str] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 7 and words[0] == "incarnation" and words[1].isdigit() and words[5] == "on":
            nodes[int(words[1])] = words[6]
    return nodes


def check_gpu(ctx: CheckContext) -> CheckResult:
    """bf16 matmul and memory copy on every GPU against the GPU type's floors."""
    target = ctx.target
    if target.gpus_per_node == 0:
        return CheckResult("gpu", Verdict.SKIP, "no GPUs configured (gpus_per_node=0)")
    if target.fake_gpus:
        return CheckResult("gpu", Verdict.SKIP, "the GPUs are fake device files: nothing to measure")
    if ctx.torch_problem:
        return CheckResult("gpu", Verdict.FAIL, ctx.torch_problem)
    output, info, result = _run_simple(ctx, "gpu")
    names = [gpu.get("gpu_name") for gpu in (result or {}).get("gpus", [])]
    return _on_evidence(
        "gpu",
        info,
        output,
        result is not None,
        "no GPU result",
        lambda: judge.judge_gpu(result or {}, ctx.thresholds(names[0] if names else None)),
    )
