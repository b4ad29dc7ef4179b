"""Verdicts from the training jobs' result files, and the fairshare check's from what sshare and
sprio showed: pure functions, no Slurm, no torch.

Each training verdict takes the JSON the script wrote (see training/*.py) and the bounds in force
and returns a CheckResult with the key figure, the threshold it was held to (None where no bound
applies, e.g. CPU runs) and a reason that says what was seen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.thresholds import Thresholds

GPU_RESUME_TOLERANCE = 1e-5


def meets(value: float, threshold: float | None, comparison: str = ">=") -> bool:
    """True when no bound applies or the value satisfies it (bounds are inclusive)."""
    if threshold is None:
        return True
    return value >= threshold if comparison == ">=" else value <= threshold


def human_bytes(nbytes: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size}{unit}"
    return f"{nbytes}B"


def scaling_efficiency(throughput_n: float, ranks: int, throughput_1: float) -> float:
    """thr_N / (N * thr_1): 1.0 is perfectly linear scaling."""
    if ranks < 1 or throughput_1 <= 0:
        raise ValueError("need ranks >= 1 and a positive single-rank throughput")
    return throughput_n / (ranks * throughput_1)


def _on_gpu(result: dict[str, Any]) -> bool:
    return bool(result.get("env", {}).get("device") == "cuda")


def _bounded(
    name: str,
    value: float,
    threshold: float | None,
    figure_name: str,
    unit: str,
    seen: str,
    comparison: str = ">=",
    details: dict[str, Any] | None = None,
) -> CheckResult:
    ok = meets(value, threshold, comparison)
    if threshold is None:
        reason = f"{seen}; no threshold applies"
    elif ok:
        reason = f"{seen}, within {comparison} {threshold:g} {unit}".rstrip()
    else:
        reason = f"{seen}, below the required {comparison} {threshold:g} {unit}".rstrip()
    return CheckResult(
        name,
        Verdict.PASS if ok else Verdict.FAIL,
        reason,
        value,
        figure_name,
        unit,
        threshold,
        comparison if threshold is not None else None,
        details=details or {},
    )


def judge_allreduce(result: dict[str, Any], bounds: Thresholds) -> CheckResult:
    largest = result["largest"]
    env = result.get("env", {})
    world = int(env.get("world_size", 0))
    details = {"sizes": result.get("sizes", []), "world_size": world, "backend": env.get("backend")}
    wrong = [row["bytes"] for row in result.get("sizes", []) if not row.get("correct")]
    if wrong or not result.get("all_correct", False):
        return CheckResult(
            "allreduce",
            Verdict.FAIL,
            f"all_reduce returned wrong sums at {', '.join(human_bytes(size) for size in wrong) or 'some size'}",
            details=details,
        )
    threshold = bounds.get("allreduce_busbw_gbps") if _on_gpu(result) and world > 1 else None
    where = f"{world} ranks on {env.get('nnodes', '?')} node(s), {env.get('backend', '?')}"
    seen = f"busbw {largest['busbw_gbps']:.3g} GB/s at {human_bytes(largest['bytes'])} ({where})"
    if not _on_gpu(result):
        seen += "; CPU run: the figure is not a hardware test"
    elif world == 1:
        seen += "; one rank: bus bandwidth is 0 by definition"
    return _bounded(
        "allreduce",
        largest["busbw_gbps"],
        threshold,
        f"busbw@{human_bytes(largest['bytes'])}",
        "GB/s",
        seen,
        details=details,
    )


def judge_ddp(result: dict[str, Any], baseline: dict[str, Any] | None, bounds: Thresholds) -> CheckResult:
    world = int(result.get("env", {}).get("world_size", 0))
    details: dict[str, Any] = {
        "world_size": world,
        "samples_per_s": result.get("samples_per_s"),
        "step_time_ms": result.get("step_time_ms"),
        "loss_first": result.get("loss_first"),
        "loss_last": result.get("loss_last"),
    }
    problems = []
    if not result.get("loss_decreased"):
        problems.append(
            f"loss did not fall ({result.get('loss_first'):.4g} -> {result.get('loss_last'):.4g})"
        )
    if not result.get("params_identical"):
        problems.append(
            f"parameters differ across ranks (digests {sorted(set(result.get('param_digests', [])))})"
        )
    if problems:
        return CheckResult("ddp", Verdict.FAIL, "; ".join(problems), details=details)
    throughput = float(result["samples_per_s"])
    if baseline is None or world < 2:
        seen = f"{throughput:.4g} samples/s on {world} rank(s), loss fell, parameters identical"
        return _bounded("ddp", throughput, None, "throughput", "samples/s", seen, details=details)
    details.update(
        baseline_samples_per_s=baseline.get("samples_per_s"),
        baseline_step_time_ms=baseline.get("step_time_ms"),
    )
    efficiency = scaling_efficiency(throughput, world, float(baseline["samples_per_s"]))
    details["scaling_efficiency"] = efficiency
    threshold = bounds.get("ddp_scaling_efficiency") if _on_gpu(result) else None
    seen = (
        f"efficiency {efficiency:.2f} ({throughput:.4g} samples/s on {world} ranks vs "
        f"{float(baseline['samples_per_s']):.4g} on 1), loss fell, parameters identical"
    )
    if not _on_gpu(result):
        seen += "; CPU ranks share cores, so no bound"
    return _bounded("ddp", efficiency, threshold, "scaling eff", "", seen, details=details)


def judge_fsdp(result: dict[str, Any]) -> CheckResult:
    details = {
        key: result.get(key)
        for key in ("impl", "step_time_ms", "save_s", "load_s", "checkpoint_files", "steps")
    }
    details["world_size"] = result.get("env", {}).get("world_size")
    problems = []
    if not result.get("reload_equal"):
        differing = [
            rank
            for rank, digest in enumerate(result.get("digests", []))
            if digest.get("saved") != digest.get("loaded")
        ]
        problems.append(f"reloaded state differs from the saved one on rank(s) {differing}")
    if not result.get("reload_was_needed"):
        problems.append("the fresh model already equalled the saved state, so the reload proved nothing")
    if not any(str(name).endswith(".distcp") for name in result.get("checkpoint_files", [])):
        problems.append(f"no .distcp shard files in {result.get('checkpoint_dir')}")
    if not result.get("loss_decreased"):
        problems.append("loss did not fall")
    if problems:
        return CheckResult("fsdp", Verdict.FAIL, "; ".join(problems), details=details)
    seen = (
        f"{result.get('impl')} on {details['world_size']} ranks: {result['step_time_ms']:.3g} ms/step, "
        f"DCP save {result.get('save_s', 0):.2f}s / load {result.get('load_s', 0):.2f}s, reload bitwise equal"
    )
    return _bounded("fsdp", float(result["step_time_ms"]), None, "step", "ms", seen, details=details)


def judge_preemptor(result: CheckResult, job_id: str, state: str, preemption: dict[str, str]) -> CheckResult:
    """The preempt check triggered by Slurm's preemption: its verdict holds only if the job of
    the preempting QoS ran (it needed the preempted job's node), and the report says who preempted."""
    result.details.update(trigger="preemption", preemptor_job=job_id, preemptor_state=state,
                          qos=preemption.get("qos"), preempted_by_qos=preemption.get("by"))
    if result.verdict is Verdict.PASS and state != "COMPLETED":
        result.verdict = Verdict.FAIL
        result.reason = f"the preempting job {job_id} (QoS {preemption.get('by')}) ended {state or 'unknown'}, not COMPLETED"
    elif result.verdict is Verdict.PASS:
        result.reason = (f"preempted (QoS {preemption.get('qos')}) by job {job_id} (QoS {preemption.get('by')}); "
                         + result.reason)
    return result


def judge_preempt(
    train: dict[str, Any] | None,
    restarts: int,
    checkpoint_step: int | None,
    turnaround_s: float | None,
    name: str = "preempt",
) -> CheckResult:
    """The job was requeued by Slurm, resumed where it checkpointed, and matches an uninterrupted run."""
    details: dict[str, Any] = {
        "restarts": restarts,
        "checkpoint_step": checkpoint_step,
        "turnaround_s": turnaround_s,
    }
    if restarts < 1:
        return CheckResult(
            name, Verdict.FAIL, "the job was never requeued (Restarts=0)", details=details
        )
    if train is None:
        return CheckResult(name, Verdict.FAIL, "the resumed run wrote no result", details=details)
    details.update(resumed_from_step=train.get("resumed_from_step"), restart_count=train.get("restart_count"))
    if train.get("status") != "completed" or int(train.get("restart_count", 0)) < 1:
        return CheckResult(
            name,
            Verdict.FAIL,
            f"last result is {train.get('status')!r} from incarnation {train.get('restart_count')}, "
            "not a completed run after the requeue",
            details=details,
        )
    if checkpoint_step is None or train.get("resumed_from_step") != checkpoint_step:
        return CheckResult(
            name,
            Verdict.FAIL,
            f"checkpointed at step {checkpoint_step} but resumed at step {train.get('resumed_from_step')}",
            details=details,
        )
    if "bitwise_equal" not in train:
        return CheckResult(
            name,
            Verdict.FAIL,
            "the resumed run reported no comparison with an uninterrupted run",
            details=details,
        )
    details.update(bitwise_equal=train.get("bitwise_equal"), max_abs_diff=train.get("max_abs_diff"))
    on_gpu = _on_gpu(train)
    bitwise = bool(train.get("bitwise_equal"))
    diff = float(train.get("max_abs_diff", float("inf")))
    if not bitwise and (not on_gpu or diff > GPU_RESUME_TOLERANCE):
        return CheckResult(
            name,
            Verdict.FAIL,
            f"final weights differ from the uninterrupted run (max |diff| {diff:.3g}"
            f"{'' if on_gpu else '; CPU runs must match bitwise'})",
            details=details,
        )
    equality = (
        "bitwise equal" if bitwise else f"equal within {GPU_RESUME_TOLERANCE:g} (max |diff| {diff:.3g})"
    )
    seen = f"requeued {restarts}x, resumed at step {checkpoint_step}, final weights {equality} to an uninterrupted run"
    if turnaround_s is None:
        return CheckResult(name, Verdict.PASS, seen, details=details)
    return _bounded(name, turnaround_s, None, "requeue->running", "s", seen, details=details)


def judge_moved_resume(result: CheckResult, first: str, second: str, incarnations: dict[int, str]) -> CheckResult:
    """A preempt verdict (``judge_preempt``) held to where the job ran: its first incarnation on
    ``first``, the resumed one on ``second``, so that the checkpoint crossed between the two nodes.
    The figure is the steps trained again after the requeue beyond the checkpoint: 0."""
    last = incarnations[max(incarnations)] if incarnations else None
    result.details.update(
        first_node=first, second_node=second, incarnation_nodes={str(k): v for k, v in sorted(incarnations.items())}
    )
    if result.verdict is not Verdict.PASS:
        return result
    if incarnations.get(0) != first or last != second or len(incarnations) < 2:
        result.verdict = Verdict.FAIL
        result.reason = (
            f"the first incarnation ran on {incarnations.get(0) or 'an unlogged node'} and the last on "
            f"{last or 'an unlogged node'}; expected {first}, then {second}: the checkpoint did not cross nodes"
        )
        return result
    repeated = int(result.details["checkpoint_step"]) - int(result.details["resumed_from_step"])
    result.figure, result.figure_name, result.unit = float(repeated), "steps repeated", "steps"
    result.threshold, result.comparison = 0.0, "<="
    result.reason = f"checkpointed on {first}, resumed on {second}: " + result.reason
    return result


def judge_gpu(result: dict[str, Any], bounds: Thresholds) -> CheckResult:
    if result.get("skipped"):
        return CheckResult("gpu", Verdict.SKIP, str(result.get("reason", "skipped by the job")))
    gpus = result.get("gpus", [])
    if not gpus:
        return CheckResult("gpu", Verdict.FAIL, "the job reported no GPU figures")
    matmul_floor = bounds.get("matmul_bf16_tflops")
    copy_floor = bounds.get("copy_tbps")
    slow = []
    for gpu in gpus:
        where = f"{gpu.get('node')} gpu{gpu.get('local_rank')}"
        if not meets(gpu["matmul_bf16_tflops"], matmul_floor):
            slow.append(f"{where}: matmul {gpu['matmul_bf16_tflops']:.4g} TFLOP/s < {matmul_floor:g}")
        if not meets(gpu["copy_tbps"], copy_floor):
            slow.append(f"{where}: copy {gpu['copy_tbps']:.3g} TB/s < {copy_floor:g}")
    worst_matmul = min(gpu["matmul_bf16_tflops"] for gpu in gpus)
    worst_copy = min(gpu["copy_tbps"] for gpu in gpus)
    names = sorted({str(gpu.get("gpu_name")) for gpu in gpus})
    details = {"gpus": gpus, "copy_threshold_tbps": copy_floor, "gpu_names": names}
    if slow:
        return CheckResult(
            "gpu",
            Verdict.FAIL,
            "; ".join(slow),
            worst_matmul,
            "min matmul bf16",
            "TFLOP/s",
            matmul_floor,
            ">=" if matmul_floor is not None else None,
            details=details,
        )
    seen = (
        f"{len(gpus)} GPU(s) {', '.join(names)}: min matmul {worst_matmul:.4g} TFLOP/s, min copy "
        f"{worst_copy:.3g} TB/s (copy floor {copy_floor if copy_floor is not None else 'none'})"
    )
    return _bounded("gpu", worst_matmul, matmul_floor, "min matmul bf16", "TFLOP/s", seen, details=details)


def under_served(accounts: Sequence[str], shares: Sequence[int], usage: Sequence[float]) -> str | None:
    """Of two sibling accounts, the one whose share is larger for its usage (Fair Tree's LevelFS,
    share / usage: an account without usage is the most under-served); None for a tie."""
    level = [share / used if used > 0 else math.inf for share, used in zip(shares, usage, strict=True)]
    if level[0] == level[1]:
        return None
    return accounts[0] if level[0] > level[1] else accounts[1]


def _figure(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def judge_fairshare(
    accounts: list[str],
    shares: list[int],
    before: list[int],
    after: dict[str, dict[str, Any]],
    pending: dict[str, dict[str, Any]],
    *,
    sensitive: bool,
    waited_s: float,
    period_s: int,
    view: str,
    priority_type: str,
    job_ids: list[str],
) -> CheckResult:
    """The fairshare check's verdict. ``before``: each account's RawUsage before the check's jobs;
    ``after``: per account {raw_usage, effective, norm_shares, level_fs (the account's row of
    sshare; None where PrivateData hides it), fairshare (the test user's row)} after Slurm's
    recalculation; ``pending``: per account {job, fairshare, priority, age, state} of sprio.
    The account that used less than its share must come first in sshare (FairShare factor,
    LevelFS where shown) and in sprio (its job's FAIRSHARE part and its priority)."""
    usage = [after[account]["raw_usage"] for account in accounts]
    under = under_served(accounts, shares, usage)
    details: dict[str, Any] = {
        "accounts": {account: {"shares": share, "raw_usage_before": old, **after[account]}
                     for account, share, old in zip(accounts, shares, before, strict=True)},
        "pending": pending, "under_served": under, "shares_decide": sensitive, "waited_s": round(waited_s, 1),
        "calc_period_s": period_s, "sshare_view": view, "priority_type": priority_type,
    }

    def result(verdict: Verdict, reason: str, lead: float | None = None) -> CheckResult:
        warnings = [] if sensitive or verdict is not Verdict.PASS else [
            "the accounts' past usage was too far from their shares to arrange in this check: the usage "
            "alone predicts this order too (the shares were not what decided it)"]
        return CheckResult("fairshare", verdict, reason, lead, "sprio FAIRSHARE lead", "", job_ids=job_ids,
                           details=details, warnings=warnings)

    used = "; ".join(f"{account} (shares {share}) {old} -> {new} billing-s"
                     for account, share, old, new in zip(accounts, shares, before, usage, strict=True))
    if priority_type != "priority/multifactor":
        used += f" (PriorityType={priority_type})"
    risen = [account for account, old, new in zip(accounts, before, usage, strict=True) if new <= old]
    if risen:
        return result(Verdict.FAIL, f"sshare RawUsage did not rise for {', '.join(risen)} after its jobs ran: {used}")
    if under is None:
        return result(Verdict.FAIL, f"the recorded usage leaves the accounts tied: {used}")
    over = accounts[1 - accounts.index(under)]
    seen = {account: after[account] for account in accounts}
    shown = "; ".join(
        f"{account} EffectvUsage {_figure(seen[account]['effective'])} (NormShares "
        f"{_figure(seen[account]['norm_shares'])}) FairShare {_figure(seen[account]['fairshare'])}"
        for account in (under, over))
    prefix = f"{used}: {under} is the under-served one; sshare after {waited_s:.0f} s: {shown}"
    problems = []
    if not _greater(seen[under]["fairshare"], seen[over]["fairshare"]):
        problems.append(f"sshare FairShare of {under} is not above {over}'s")
    if view == "accounts" and not _greater(seen[under]["level_fs"], seen[over]["level_fs"]):
        problems.append(f"sshare LevelFS {_figure(seen[under]['level_fs'])} of {under} is not above "
                        f"{_figure(seen[over]['level_fs'])} of {over}")
    first, second = pending.get(under, {}), pending.get(over, {})
    not_pending = [f"{account}'s job {job.get('job')} is {job.get('state')}" for account, job in pending.items()
                   if job.get("state") != "PENDING" or "priority" not in job]
    if not_pending:
        sprio = next((job["sprio"] for job in pending.values() if job.get("sprio")), "")
        problems.append("sprio has no factors for " + ", ".join(not_pending) + (f" ({sprio})" if sprio else ""))
        return result(Verdict.FAIL, f"{prefix}; " + "; ".join(problems))
    ranked = (f"sprio FAIRSHARE job {first['job']} ({under}) {first['fairshare']:g} vs job {second['job']} ({over}) "
              f"{second['fairshare']:g}, priority {first['priority']:g} vs {second['priority']:g}")
    if not first["fairshare"] > second["fairshare"]:
        problems.append(f"{under}'s pending job has no larger FAIRSHARE part")
    if not first["priority"] > second["priority"]:
        problems.append(f"sprio ranks {over}'s job first")
    lead = first["fairshare"] - second["fairshare"]
    if problems:
        return result(Verdict.FAIL, f"{prefix}; {ranked}: " + "; ".join(problems), lead)
    return result(Verdict.PASS, f"{prefix}; {ranked}: {under}'s job ranks first", lead)


def _greater(first: Any, second: Any) -> bool:
    return first is not None and second is not None and first > second
