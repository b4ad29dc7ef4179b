"""The shared-storage check: the smoke work area is one file system on every node.

Two jobs on two nodes pass a file: the first writes a token on node A, the second (after it, on
node B) reads it back. Then the training that the preempt check runs crosses the same two nodes:
pinned to A, it checkpoints into the work area on USR1 and requeues itself; while Slurm holds the
requeued job, its required node becomes B, where it resumes from A's checkpoint and must end where
an uninterrupted run ends. On one host (the local cluster) the nodes share a disk anyway: the
check then proves the jobs' placement, and the test bed with the product's own mount proves the
sharing (docs/storage.md).
"""

from __future__ import annotations

import secrets

from cluster_cli.smoke import judge
from cluster_cli.smoke.checks_training import (
    PREEMPT_HOLD_STEP,
    incarnation_nodes,
    parked,
    signal_checkpoint,
    submit,
    wait_resumed,
)
from cluster_cli.smoke.context import CheckContext, job_failure
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.text import read_job_text

CHECK = "shared-storage"
PASS_FILE = "#!/bin/bash\n" + (
    # write FILE TOKEN: this node's name and the token, renamed into place whole
    'if [ "$1" = write ]; then printf \'%s %s\\n\' "$3" "$SLURMD_NODENAME" > "$2.tmp" && mv "$2.tmp" "$2"\n'
    # read FILE: what it holds, and where it was read
    'else printf \'read on %s: %s\\n\' "$SLURMD_NODENAME" "$(cat "$2")"; fi\n'
)


def check_shared_storage(ctx: CheckContext) -> CheckResult:
    if ctx.torch_problem:
        return CheckResult(CHECK, Verdict.FAIL, ctx.torch_problem)
    usable = [node for node in ctx.target.nodes if node not in ctx.unusable_nodes]
    if len(usable) < 2:
        if ctx.unusable_nodes:
            ctx.all_nodes_args()  # raises NodesUnusable, naming them
        return CheckResult(CHECK, Verdict.SKIP, f"needs two nodes to pass files between; the target has {usable}")
    first, second = usable[:2]
    crossing = _file_crossing(ctx, first, second)
    if crossing.verdict is not Verdict.PASS:
        return crossing
    resumed = _resume_elsewhere(ctx, first, second)
    resumed.details["file"] = crossing.details
    resumed.job_ids = crossing.job_ids + resumed.job_ids
    if resumed.verdict is Verdict.PASS:
        resumed.reason = f"{crossing.reason}; {resumed.reason}"
    return resumed


def _file_crossing(ctx: CheckContext, first: str, second: str) -> CheckResult:
    """A job on ``first`` writes a token into the check's directory; one on ``second`` reads it."""
    work = ctx.check_dir(CHECK)
    script = str(ctx.write_script(CHECK, "pass_file.sh", PASS_FILE))
    token = secrets.token_hex(8)  # not a secret: only this run's file can hold it
    passed = str(work / "passed-file")
    common = [*ctx.job_args(CHECK), "--nodes=1", "--ntasks=1", f"--chdir={work}"]
    writer = ctx.session.sbatch(
        [*common, f"--nodelist={first}", f"--output={work}/write-%j.out", script, "write", passed, token], cwd=work
    )
    reader = ctx.session.sbatch(
        [*common, f"--nodelist={second}", f"--dependency=afterok:{writer}", f"--output={work}/read-%j.out",
         script, "read", passed],
        cwd=work,
    )
    wrote = ctx.session.wait(writer, ctx.remaining())
    if wrote.state != "COMPLETED":
        ctx.session.cancel(reader)
        return job_failure(CHECK, wrote, work / f"write-{writer}.out", f"the job writing the file on {first} failed")
    read = ctx.session.wait(reader, ctx.remaining())
    output = work / f"read-{reader}.out"
    if read.state != "COMPLETED":
        return job_failure(CHECK, read, output, f"the job reading the file on {second} failed")
    try:
        seen = read_job_text(output).strip()
    except OSError:
        seen = ""
    expected = f"read on {second}: {token} {first}"
    details = {"writer_job": writer, "reader_job": reader, "expected": expected, "seen": seen}
    if seen != expected:
        return CheckResult(CHECK, Verdict.FAIL, f"job {reader} on {second} read {seen!r}, expected {expected!r}: "
                           "the work area is not one file system on both nodes", job_ids=[writer, reader],
                           details=details)
    return CheckResult(CHECK, Verdict.PASS, f"a file job {writer} wrote on {first} was read by job {reader} on "
                       f"{second}", job_ids=[writer, reader], details=details)


def _resume_elsewhere(ctx: CheckContext, first: str, second: str) -> CheckResult:
    """preempt.sbatch pinned to ``first``, signalled at its hold step, resumed on ``second``."""
    run_dir = ctx.check_dir(CHECK) / "run"
    holding = run_dir / "holding"
    hold = ["--hold-at-step", str(PREEMPT_HOLD_STEP)]
    job, _, output = submit(ctx, CHECK, {"PREEMPT_DIR": str(run_dir)}, hold, script="preempt", nodes=[first])
    not_started = parked(ctx, CHECK, job, output, holding) or signal_checkpoint(ctx, CHECK, job, output)
    if not_started:
        return not_started
    result = wait_resumed(ctx, job, output, run_dir, None, CHECK, moved_to=second)
    return judge.judge_moved_resume(result, first, second, incarnation_nodes(output))

