"""The checks, in the order they run: quick cluster checks first, then the training jobs.

Each check has a scope: "partition" checks (launch, arrays, dependencies, salloc, pty,
KillOnBadExit, MPI, a QoS's per-user GPU limit, fair share) run once per partition over its nodes; "group" checks (GPU binding, accounting,
node fill, the training jobs, the container check, shared storage, the all-nodes sweep) run once per node group in each partition,
pinned to that group's nodes, with its GPU count, type and thresholds. A target of scope "whole"
(one plain SmokeTarget) runs every check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cluster_cli.smoke import (
    checks_accounting,
    checks_cluster,
    checks_container,
    checks_fairshare,
    checks_mpi,
    checks_nodes,
    checks_storage,
    checks_training,
)
from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.suite_errors import UnknownCheckError
from cluster_cli.smoke.report import CheckResult
from cluster_cli.smoke.target import SmokeTarget


@dataclass(frozen=True)
class Check:
    name: str
    summary: str
    run: Callable[[CheckContext], CheckResult]
    needs_torch: bool = False
    scope: str = "partition"
    """"partition": once per partition over all its nodes; "group": once per node group."""
    default: bool = True
    """Part of a run that names no checks (the all-nodes sweep is asked for by name)."""

    def applies_to(self, target: SmokeTarget) -> bool:
        return target.scope in ("whole", self.scope)


CHECKS: tuple[Check, ...] = (
    Check("srun", "srun reaches every node", checks_cluster.check_srun),
    Check(
        "gpu-binding", "--gpus-per-task=1 gives each task its own GPU", checks_cluster.check_gpu_binding,
        scope="group",
    ),
    Check(
        "all-nodes", "every node of the group: hostname, GPU count and binding in one step",
        checks_nodes.check_all_nodes, scope="group", default=False,
    ),
    Check("job-array", "a job array completes, each task with its index", checks_cluster.check_job_array),
    Check("dependency", "afterok runs after success, never after failure", checks_cluster.check_dependency),
    Check("salloc", "salloc + srun inside the allocation", checks_cluster.check_salloc),
    Check("pty", "interactive srun --pty shell driven through a pty", checks_cluster.check_pty),
    Check(
        "kill-on-bad-exit", "one failing rank ends the step promptly", checks_cluster.check_kill_on_bad_exit
    ),
    Check("mpi", "srun --mpi starts one MPI world over two nodes: exact all-reduce, latency", checks_mpi.check_mpi),
    Check(
        "sacct", "accounting records the job with gres/gpu (and gres/gpu:TYPE)", checks_cluster.check_sacct,
        scope="group",
    ),
    Check(
        "qos-limit", "a QoS's per-user GPU limit holds the job over it", checks_accounting.check_qos_limit,
    ),
    Check(
        "fairshare", "the under-served of two accounts (shares 3:1) ranks first in sshare and sprio",
        checks_fairshare.check_fairshare,
    ),
    Check(
        "node-fill", "one node full of 1-GPU (or 1-CPU) jobs, all running at once",
        checks_nodes.check_node_fill, scope="group",
    ),
    Check(
        "allreduce", "all_reduce bus bandwidth at the largest payload", checks_training.check_allreduce, True,
        "group",
    ),
    Check(
        "ddp", "DDP: loss falls, ranks agree, scaling efficiency", checks_training.check_ddp, True, "group"
    ),
    Check(
        "container", "DDP in an image via srun --container; its GPU device file opens only with the GPU",
        checks_container.check_container, True, "group",
    ),
    Check("fsdp", "FSDP2 + sharded DCP checkpoint reload", checks_training.check_fsdp, True, "group"),
    Check(
        "preempt", "USR1 checkpoint, requeue, bitwise resume", checks_training.check_preempt, True, "group"
    ),
    Check(
        "shared-storage", "a file crosses two nodes; a requeued training resumes on the other node from its checkpoint",
        checks_storage.check_shared_storage, True, "group",
    ),
    Check("gpu", "per-GPU bf16 matmul and copy bandwidth", checks_training.check_gpu, True, "group"),
)

CHECK_NAMES: tuple[str, ...] = tuple(check.name for check in CHECKS)


def select(only: list[str] | None) -> list[Check]:
    """The checks to run, in suite order; unknown names raise UnknownCheckError listing the known ones."""
    if not only:
        return [check for check in CHECKS if check.default]
    unknown = sorted(set(only) - set(CHECK_NAMES))
    if unknown:
        raise UnknownCheckError(f"unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECK_NAMES)}")
    return [check for check in CHECKS if check.name in only]
