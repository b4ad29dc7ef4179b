"""Per-node checks of a node group: fill one node with small jobs, and sweep every node at once.

``node-fill`` proves a node can run as many one-GPU (or, without GPUs, one-CPU) jobs side by side
as it has GPUs (CPUs): a default memory request of the whole node, for one, lets only one run.
``all-nodes`` is one step over every usable node of the group: each node reports its hostname
and the GPU each of its tasks owns, and gets its own verdict.
"""

from __future__ import annotations

import json
import time
from typing import Any

from cluster_cli.smoke.checks_cluster import GPU_PROBE, binding_problems, gpu_identities
from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.suite_errors import NodesUnusable
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.text import tail

# Long enough to outlast the polling; the jobs are cancelled as soon as the check has its answer.
FILL_JOB_SECONDS = 600
# A job that can start does so at submission or at the next backfill pass (bf_interval, 30 s).
FILL_WAIT_MAX_S = 45.0


def fill_request(ctx: CheckContext) -> tuple[int, list[str], str]:
    """How many jobs fill one node, the resources each asks for, and what a job holds (for people)."""
    target = ctx.target
    if target.gpus_per_node:
        gres = f"gpu:{target.gres_type}:1" if target.gres_type else "gpu:1"
        return target.gpus_per_node, ["--ntasks=1", f"--gres={gres}"], "one-GPU"
    return target.cpus_per_node, ["--ntasks=1", "--cpus-per-task=1"], "one-CPU"


def check_node_fill(ctx: CheckContext) -> CheckResult:
    """As many one-GPU (one-CPU) jobs as one node has GPUs (CPUs), pinned to it: all RUNNING at once."""
    node = ctx.target.nodes[0]
    if node in ctx.unusable_nodes:
        raise NodesUnusable(f"node-fill needs {node}; it is {ctx.unusable_nodes[node]}")
    count, request, kind = fill_request(ctx)
    work = ctx.check_dir("node-fill")
    start = time.monotonic()
    jobs = [
        ctx.session.sbatch(
            [*ctx.job_args("node-fill"), "--nodes=1", f"--nodelist={node}", *request,
             f"--output={work}/slurm-%j.out", f"--wrap=exec sleep {FILL_JOB_SECONDS}"],
            cwd=work,
        )
        for _ in range(count)
    ]
    try:
        states = _wait_all_running(ctx, jobs, min(FILL_WAIT_MAX_S, ctx.remaining()))
    finally:
        for job in jobs:
            ctx.session.cancel(job)
    running = [job for job, (state, _) in states.items() if state == "RUNNING"]
    details: dict[str, Any] = {"node": node, "jobs": {job: list(seen) for job, seen in states.items()}}
    if len(running) == count:
        return CheckResult(
            "node-fill", Verdict.PASS, f"{count} {kind} jobs ran at once on {node}",
            time.monotonic() - start, "all running after", "s", job_ids=jobs, details=details,
        )
    waiting = ", ".join(
        f"{job} {state} ({reason})" for job, (state, reason) in states.items() if state != "RUNNING"
    )
    hint = ""
    if "Resources" in waiting:
        hint = " - does every job get the node's whole memory (no DefMemPerCPU/DefMemPerGPU)?"
    return CheckResult(
        "node-fill", Verdict.FAIL,
        f"only {len(running)} of {count} {kind} jobs ran at once on {node}; not running: {waiting}{hint}",
        job_ids=jobs, details=details,
    )


def _wait_all_running(ctx: CheckContext, jobs: list[str], timeout: float) -> dict[str, tuple[str, str]]:
    """Poll squeue until every job is RUNNING together, or ``timeout``; the last (state, reason) of each."""
    deadline = time.monotonic() + timeout
    while True:
        states = job_states(ctx, jobs)
        if all(state == "RUNNING" for state, _ in states.values()) or time.monotonic() > deadline:
            return states
        time.sleep(1.0)


def job_states(ctx: CheckContext, jobs: list[str]) -> dict[str, tuple[str, str]]:
    """``squeue``'s state and reason of each job; a job squeue no longer lists is GONE."""
    done = ctx.session.run(["squeue", "-h", "-j", ",".join(jobs), "-o", "%i|%T|%r"], timeout=30)
    return parse_squeue_states(done.stdout, jobs)


def parse_squeue_states(output: str, jobs: list[str]) -> dict[str, tuple[str, str]]:
    seen: dict[str, tuple[str, str]] = {}
    for line in output.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3:
            seen[parts[0]] = (parts[1], parts[2])
    return {job: seen.get(job, ("GONE", "not in squeue")) for job in jobs}


def check_all_nodes(ctx: CheckContext) -> CheckResult:
    """One step over every usable node of the group, a task per GPU (one per CPU-only node):
    each node must answer, and with GPUs each task must own exactly one distinct GPU of its node."""
    verdicts = {node: f"not usable: {state}" for node, state in ctx.every_unusable.items()}
    usable = [node for node in ctx.every_node if node not in ctx.every_unusable]
    done = None
    if usable:
        done = ctx.session.run(_sweep_argv(ctx, usable), timeout=ctx.remaining())
        tasks = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        verdicts.update(node_verdicts(usable, tasks, ctx.target.gpus_per_node, ctx.target.node_devices))
    failing = sorted(node for node, verdict in verdicts.items() if verdict != "ok")
    details = {"nodes": dict(sorted(verdicts.items()))}
    per_node = ctx.target.gpus_per_node
    what = f"{per_node} GPU(s) each, bound one per task" if per_node else "hostname"
    if failing:
        listed = "; ".join(f"{node}: {verdicts[node]}" for node in failing)
        exit_note = f" (srun exit {done.returncode})" if done is not None and done.returncode else ""
        return CheckResult(
            "all-nodes", Verdict.FAIL,
            f"{len(failing)} of {len(verdicts)} node(s) failed{exit_note}: {listed}",
            len(verdicts) - len(failing), "nodes ok", "", details=details,
            output_tail=tail(done.output) if done is not None else None,
        )
    return CheckResult(
        "all-nodes", Verdict.PASS, f"all {len(verdicts)} node(s) answered in one step ({what})",
        len(verdicts), "nodes ok", "", details=details,
    )


def _sweep_argv(ctx: CheckContext, nodes: list[str]) -> list[str]:
    # Untyped: the node list already names the group, and Slurm 22.05 gave the tasks no GPU at all
    # for a typed --gpus-per-task with several tasks per node (seen on the hetero example cluster).
    per_node = ctx.target.gpus_per_node
    tasks = max(1, per_node)
    return [
        "srun", *ctx.job_args("all-nodes", pinned=False), f"--nodes={len(nodes)}",
        f"--nodelist={','.join(nodes)}", f"--ntasks={len(nodes) * tasks}", f"--ntasks-per-node={tasks}",
        *(["--gpus-per-task=1"] if per_node else []), "python3", "-c", GPU_PROBE, ctx.target.gpu_device_glob,
    ]


def node_verdicts(
    nodes: list[str], tasks: list[dict[str, Any]], per_node: int, node_devices: dict[str, list[str]]
) -> dict[str, str]:
    """"ok", or what is wrong, for each node: it answered, and with GPUs each of its ``per_node``
    tasks owns one GPU of its own."""
    identities = gpu_identities(tasks, node_devices)
    verdicts = {}
    for node in nodes:
        if node not in identities:
            verdicts[node] = "no task reported from this node"
            continue
        problems = binding_problems({node: identities[node]}, per_node) if per_node else []
        verdicts[node] = "; ".join(problem.removeprefix(f"{node}: ") for problem in problems) or "ok"
    return verdicts
