"""The checks, in the order they run: quick cluster checks first, then the training jobs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cluster_cli.smoke import checks_cluster, checks_training
from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.errors import UnknownCheckError
from cluster_cli.smoke.report import CheckResult


@dataclass(frozen=True)
class Check:
    name: str
    summary: str
    run: Callable[[CheckContext], CheckResult]
    needs_torch: bool = False


CHECKS: tuple[Check, ...] = (
    Check("srun", "srun reaches every node", checks_cluster.check_srun),
    Check("gpu-binding", "--gpus-per-task=1 gives each task its own GPU", checks_cluster.check_gpu_binding),
    Check("job-array", "a job array completes, each task with its index", checks_cluster.check_job_array),
    Check("dependency", "afterok runs after success, never after failure", checks_cluster.check_dependency),
    Check("salloc", "salloc + srun inside the allocation", checks_cluster.check_salloc),
    Check("pty", "interactive srun --pty shell driven through a pty", checks_cluster.check_pty),
    Check(
        "kill-on-bad-exit", "one failing rank ends the step promptly", checks_cluster.check_kill_on_bad_exit
    ),
    Check("sacct", "accounting records the job with gres/gpu", checks_cluster.check_sacct),
    Check(
        "allreduce", "all_reduce bus bandwidth at the largest payload", checks_training.check_allreduce, True
    ),
    Check("ddp", "DDP: loss falls, ranks agree, scaling efficiency", checks_training.check_ddp, True),
    Check("fsdp", "FSDP2 + sharded DCP checkpoint reload", checks_training.check_fsdp, True),
    Check("preempt", "USR1 checkpoint, requeue, bitwise resume", checks_training.check_preempt, True),
    Check("gpu", "per-GPU bf16 matmul and copy bandwidth", checks_training.check_gpu, True),
)

CHECK_NAMES: tuple[str, ...] = tuple(check.name for check in CHECKS)


def select(only: list[str] | None) -> list[Check]:
    """The checks to run, in suite order; unknown names raise UnknownCheckError listing the known ones."""
    if not only:
        return list(CHECKS)
    unknown = sorted(set(only) - set(CHECK_NAMES))
    if unknown:
        raise UnknownCheckError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECK_NAMES)}")
    return [check for check in CHECKS if check.name in only]
