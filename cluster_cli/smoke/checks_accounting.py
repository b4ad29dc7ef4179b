"""The checks of the cluster's accounting data: a QoS's per-user GPU limit holds (qos-limit).
The preempt check (checks_training) uses the inventory's preemption QoS where it has one."""

from __future__ import annotations

from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.slurm import JobInfo

HOLD_SCRIPT = "#!/bin/bash\n# holds one GPU until the check cancels it\nsleep 600\n"
LIMIT_REASON = "QOSMaxGRESPerUser"


def check_qos_limit(ctx: CheckContext) -> CheckResult:
    """The user runs as many one-GPU jobs as the QoS's MaxTRESPerUser allows; one more waits with
    reason QOSMaxGRESPerUser (or, under DenyOnLimit, is refused at submission)."""
    limit, target = ctx.target.qos_limit, ctx.target
    if not limit:
        return CheckResult("qos-limit", Verdict.SKIP, "the inventory has no QoS that caps each user's GPUs "
                           "(MaxTRESPerUser gres/gpu) and that the test user may use")
    if not target.accounting_enabled:
        return CheckResult("qos-limit", Verdict.SKIP, "accounting is off: Slurm enforces no QoS limit")
    allowed = int(limit["gpus"])
    if target.gpus_per_node * len(target.nodes) <= allowed:
        return CheckResult("qos-limit", Verdict.SKIP, f"needs more than {allowed} GPUs to show the limit "
                           f"(this target has {target.gpus_per_node * len(target.nodes)})")
    work = ctx.check_dir("qos-limit")
    script = ctx.write_script("qos-limit", "hold.sh", HOLD_SCRIPT)
    args = [*ctx.job_args("qos-limit"), f"--qos={limit['qos']}", f"--account={limit['account']}", "--ntasks=1",
            "--gres=gpu:1", f"--output={work}/slurm-%j.out", str(script)]
    jobs: list[str] = []
    try:
        for _ in range(allowed):
            jobs.append(ctx.session.sbatch(args, cwd=work))
        for job in jobs:
            info = ctx.session.wait(job, ctx.remaining(), until=lambda info: info.state == "RUNNING" or info.finished)
            if info.state != "RUNNING":
                return _failed(f"job {job} within the limit did not run: {info.state} ({info.get('Reason')})", jobs)
        return _one_more(ctx, args, work, limit, jobs)
    finally:
        for job in jobs:
            ctx.session.cancel(job)


def _one_more(ctx: CheckContext, args: list[str], work, limit: dict, jobs: list[str]) -> CheckResult:
    allowed, qos = int(limit["gpus"]), limit["qos"]
    if limit.get("deny"):
        refused = ctx.session.run(["sbatch", "--parsable", *args], timeout=30, cwd=work)
        if refused.returncode == 0:
            jobs.append(refused.stdout.strip().split(";")[0])
            return _failed(f"QoS {qos} has DenyOnLimit, but a job over its {allowed}-GPU limit was accepted", jobs)
        return _passed(f"job {allowed + 1} refused at submission (DenyOnLimit): {refused.output.strip()}", jobs,
                       allowed, qos)
    extra = ctx.session.sbatch(args, cwd=work)
    jobs.append(extra)
    info = ctx.session.wait(extra, min(60.0, ctx.remaining()), until=_reason_known)
    reason = info.get("Reason")
    if info.state == "PENDING" and reason == LIMIT_REASON:
        return _passed(f"job {allowed + 1} waits with reason {reason}", jobs, allowed, qos)
    return _failed(f"job {allowed + 1} over QoS {qos}'s {allowed}-GPU limit is {info.state} with reason "
                   f"{reason or 'none'}, not PENDING ({LIMIT_REASON})", jobs)


def _reason_known(info: JobInfo) -> bool:
    return info.finished or info.state == "RUNNING" or info.get("Reason") not in ("", "None", "Priority")


def _passed(summary: str, jobs: list[str], allowed: int, qos: str) -> CheckResult:
    return CheckResult("qos-limit", Verdict.PASS, f"{allowed} one-GPU job(s) ran in QoS {qos}; {summary}",
                       job_ids=list(jobs), details={"qos": qos, "gpus_per_user": allowed})


def _failed(reason: str, jobs: list[str]) -> CheckResult:
    return CheckResult("qos-limit", Verdict.FAIL, reason, job_ids=list(jobs))
