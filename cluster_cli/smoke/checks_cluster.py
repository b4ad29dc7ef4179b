"""Cluster checks that need no torch: launch, GPU binding, arrays, dependencies, salloc, pty,
KillOnBadExit and accounting. Each returns a CheckResult; the runner times it."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from cluster_cli.smoke.context import CheckContext, job_failure
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.suite_errors import CheckTimeout
from cluster_cli.smoke.slurm import JobInfo, stop_process_group
from cluster_cli.smoke.text import read_job_text, tail

# Runs in every task of the binding check: which GPU device files this task may open.
# errno EPERM/EACCES = denied by the devices cgroup; anything else (ENXIO for a fake device,
# success for a real one) = the device is reachable from this task.
GPU_PROBE = r"""
import errno, glob, json, os, sys
seen = {"node": os.environ.get("SLURMD_NODENAME"), "task": int(os.environ.get("SLURM_PROCID", -1)),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "allowed": [], "denied": []}
for path in sorted(glob.glob(sys.argv[1])):
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        seen["allowed"].append(path)
    except OSError as error:
        (seen["denied"] if error.errno in (errno.EPERM, errno.EACCES) else seen["allowed"]).append(path)
print(json.dumps(seen), flush=True)
"""


def _fail(name: str, reason: str, **kwargs: Any) -> CheckResult:
    return CheckResult(name, Verdict.FAIL, reason, **kwargs)


def check_srun(ctx: CheckContext) -> CheckResult:
    """One task on every node; each reports SLURMD_NODENAME."""
    nodes = ctx.target.nodes
    done = ctx.session.run(
        [
            "srun",
            *ctx.job_args("srun"),
            *ctx.all_nodes_args(),
            f"--ntasks={len(nodes)}",
            "--ntasks-per-node=1",
            "printenv",
            "SLURMD_NODENAME",
        ],
        timeout=ctx.remaining(),
    )
    seen = sorted(line.strip() for line in done.stdout.splitlines() if line.strip())
    if done.returncode != 0:
        return _fail(
            "srun", f"srun over {len(nodes)} nodes exited {done.returncode}", output_tail=tail(done.output)
        )
    if seen != sorted(nodes):
        missing = sorted(set(nodes) - set(seen))
        return _fail(
            "srun",
            f"tasks ran on {seen}, expected one on each of {sorted(nodes)} (missing {missing})",
            output_tail=tail(done.output),
        )
    return CheckResult(
        "srun",
        Verdict.PASS,
        f"one task on each of {len(nodes)} nodes",
        done.seconds,
        "launch",
        "s",
        details={"nodes": seen},
    )


def gpu_identities(
    tasks: list[dict[str, Any]], node_devices: dict[str, list[str]] | None = None
) -> dict[str, dict[int, tuple[str, ...]]]:
    """Per node, the GPU(s) each task owns.

    With ConstrainDevices the device cgroup is the proof: a node's GPUs are the devices denied to
    at least one of its tasks, and a task owns the ones among them it may open. Where the node's
    own device files are known (``node_devices``), a node with one GPU (nothing to deny) is proved
    by that file alone, and device files of other nodes on the same host never count as the task's.
    Without a device constraint, CUDA_VISIBLE_DEVICES is all there is to compare.
    """
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for task in tasks:
        by_node[str(task["node"])].append(task)
    identities: dict[str, dict[int, tuple[str, ...]]] = {}
    for node, node_tasks in by_node.items():
        own = set((node_devices or {}).get(node, []))
        gpus = {path for task in node_tasks for path in task.get("denied", [])}
        if own:
            # The cgroup is at work when it denies any of the node's own files to some task.
            gpus = own if gpus & own or len(own) == 1 else set()
        if gpus:
            identities[node] = {
                int(task["task"]): tuple(sorted(set(task.get("allowed", [])) & gpus)) for task in node_tasks
            }
        else:
            identities[node] = {
                int(task["task"]): tuple(
                    sorted(filter(None, str(task.get("cuda_visible_devices") or "").split(",")))
                )
                for task in node_tasks
            }
    return identities


def binding_problems(identities: dict[str, dict[int, tuple[str, ...]]], per_node: int) -> list[str]:
    problems = []
    for node, owned in sorted(identities.items()):
        if len(owned) != per_node:
            problems.append(f"{node}: {len(owned)} task(s) reported, expected {per_node}")
        for task, devices in sorted(owned.items()):
            if len(devices) != 1:
                problems.append(
                    f"{node} task {task}: sees {len(devices)} GPU(s) {list(devices)}, expected exactly 1"
                )
        seen: dict[tuple[str, ...], int] = {}
        for task, devices in sorted(owned.items()):
            if devices and devices in seen:
                problems.append(f"{node}: tasks {seen[devices]} and {task} share {list(devices)}")
            seen.setdefault(devices, task)
    return problems


def check_gpu_binding(ctx: CheckContext) -> CheckResult:
    """--gpus-per-task=1 gives every task on a node its own GPU; asking for too many is refused."""
    per_node = ctx.target.gpus_per_node
    if per_node == 0:
        return CheckResult("gpu-binding", Verdict.SKIP, "no GPUs configured (gpus_per_node=0)")
    nodes = ctx.target.nodes
    done = ctx.session.run(
        [
            "srun",
            *ctx.job_args("gpu-binding"),
            *ctx.all_nodes_args(),
            f"--ntasks={len(nodes) * per_node}",
            f"--ntasks-per-node={per_node}",
            "--gpus-per-task=1",
            "python3",
            "-c",
            GPU_PROBE,
            ctx.target.gpu_device_glob,
        ],
        timeout=ctx.remaining(),
    )
    if done.returncode != 0:
        return _fail(
            "gpu-binding", f"srun --gpus-per-task=1 exited {done.returncode}", output_tail=tail(done.output)
        )
    tasks = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    identities = gpu_identities(tasks, ctx.target.node_devices)
    problems = binding_problems(identities, per_node)
    if sorted(identities) != sorted(nodes):
        problems.append(f"tasks reported from {sorted(identities)}, expected {sorted(nodes)}")
    over = ctx.session.run(
        [
            "srun",
            *ctx.job_args("gpu-binding"),
            "--nodes=1",
            f"--ntasks={per_node + 1}",
            "--gpus-per-task=1",
            # Asks the controller whether the request could ever run, without waiting for it:
            # `--immediate` also fails when the nodes are merely busy, which passed as "refused".
            "--test-only",
            "true",
        ],
        timeout=min(60.0, ctx.remaining()),
    )
    if over.returncode == 0:
        problems.append(f"{per_node + 1} tasks x 1 GPU on one node with {per_node} GPUs was not refused")
    evidence = (
        "device cgroup" if any(task.get("denied") for task in tasks)
        else "the node's own device file" if ctx.target.node_devices and per_node == 1
        else "CUDA_VISIBLE_DEVICES only"
    )
    details = {"tasks": tasks, "evidence": evidence, "over_request": tail(over.output, 3)}
    if problems:
        return _fail("gpu-binding", "; ".join(problems), output_tail=tail(done.output), details=details)
    return CheckResult(
        "gpu-binding",
        Verdict.PASS,
        f"{len(tasks)} tasks each own one distinct GPU per node (evidence: {evidence}); over-asking refused",
        len(tasks),
        "tasks bound",
        "",
        details=details,
    )


ARRAY_SCRIPT = """#!/bin/bash
echo "$SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURMD_NODENAME" > "task-$SLURM_ARRAY_TASK_ID.txt"
"""
ARRAY_TASKS = 4


def check_job_array(ctx: CheckContext) -> CheckResult:
    """A 4-task array: every task completes and writes its own index."""
    work = ctx.check_dir("job-array")
    script = ctx.write_script("job-array", "array.sh", ARRAY_SCRIPT)
    start = time.monotonic()
    job = ctx.session.sbatch(
        [
            *ctx.job_args("job-array"),
            f"--array=0-{ARRAY_TASKS - 1}",
            "--ntasks=1",
            f"--output={work}/slurm-%A_%a.out",
            str(script),
        ],
        cwd=work,
    )
    info = ctx.session.wait(job, ctx.remaining())
    elapsed = time.monotonic() - start
    states = info.states
    found = {}
    for index in range(ARRAY_TASKS):
        text = (
            read_job_text(work / f"task-{index}.txt").split() if (work / f"task-{index}.txt").exists() else []
        )
        found[index] = text
    problems = [f"task {i} wrote nothing" for i, text in found.items() if not text]
    problems += [
        f"task {i} reported {text[:2]}" for i, text in found.items() if text and text[:2] != [job, str(i)]
    ]
    if info.records and (len(states) != ARRAY_TASKS or any(state != "COMPLETED" for state in states)):
        problems.append(f"task states {states}, expected {ARRAY_TASKS} x COMPLETED")
    if problems:
        return _fail(
            "job-array",
            "; ".join(problems),
            job_ids=[job],
            output_tail=tail("\n".join(read_job_text(p) for p in sorted(work.glob("slurm-*.out")))),
        )
    return CheckResult(
        "job-array",
        Verdict.PASS,
        f"{ARRAY_TASKS} array tasks completed, each with its own index",
        elapsed,
        "all tasks",
        "s",
        job_ids=[job],
        details={"states": states},
    )


def check_dependency(ctx: CheckContext) -> CheckResult:
    """afterok runs after a success (and only after it ends) and never after a failure."""
    work = ctx.check_dir("dependency")
    args = [*ctx.job_args("dependency"), "--ntasks=1"]
    ok_script = ctx.write_script("dependency", "ok.sh", "#!/bin/bash\nsleep 1\ndate +%s.%N > ok.end\n")
    after_ok = ctx.write_script("dependency", "after_ok.sh", "#!/bin/bash\ndate +%s.%N > after_ok.start\n")
    bad_script = ctx.write_script("dependency", "bad.sh", "#!/bin/bash\nexit 3\n")
    after_bad = ctx.write_script("dependency", "after_bad.sh", "#!/bin/bash\ntouch after_bad.ran\n")
    out = f"--output={work}/slurm-%j.out"
    ok_job = ctx.session.sbatch([*args, out, str(ok_script)], cwd=work)
    next_job = ctx.session.sbatch([*args, out, f"--dependency=afterok:{ok_job}", str(after_ok)], cwd=work)
    # After the afterok pair, not beside it: two batch jobs of one user starting at once on one node
    # can lose Slurm 22.05's cgroup v1 cpuset race ("cpuset.cpus: Device or resource busy"), and the
    # job whose launch failed is requeued and held (seen in a clean-clone CI run, 2026-11-27).
    bad_job = ctx.session.sbatch([*args, out, f"--dependency=afterany:{next_job}", str(bad_script)], cwd=work)
    never_job = ctx.session.sbatch([*args, out, f"--dependency=afterok:{bad_job}", str(after_bad)], cwd=work)
    jobs = [ok_job, next_job, bad_job, never_job]
    try:
        infos = {job: ctx.session.wait(job, ctx.remaining()) for job in (ok_job, next_job, bad_job)}
        never_seen: list[str] = []

        def settled(info: JobInfo) -> bool:
            never_seen.append(info.state)
            # Held forever (DependencyNeverSatisfied) or cancelled by kill_invalid_depend.
            return info.finished or "DependencyNeverSatisfied" in info.get("Reason")

        never = ctx.session.wait(never_job, min(60.0, ctx.remaining()), until=settled)
    finally:
        ctx.session.cancel(never_job)
    problems = []
    if infos[ok_job].state != "COMPLETED":
        problems.append(f"first job {ok_job} ended {infos[ok_job].state}")
    if infos[next_job].state != "COMPLETED":
        problems.append(f"afterok job {next_job} ended {infos[next_job].state}")
    if infos[bad_job].state != "FAILED":
        problems.append(f"failing job {bad_job} ended {infos[bad_job].state}, expected FAILED")
    try:
        gap = float(read_job_text(work / "after_ok.start")) - float(read_job_text(work / "ok.end"))
    except (OSError, ValueError):
        gap = None
        problems.append("the afterok job or its predecessor left no timestamp")
    if gap is not None and gap < 0:
        problems.append(f"afterok job started {-gap:.2f}s before its predecessor ended")
    ran_states = {"RUNNING", "COMPLETED", "COMPLETING", "FAILED"}
    if (work / "after_bad.ran").exists() or ran_states & set(never_seen):
        problems.append(f"job {never_job} ran although its dependency {bad_job} failed (states {never_seen})")
    if problems:
        return _fail(
            "dependency",
            "; ".join(problems),
            job_ids=jobs,
            output_tail=tail("\n".join(read_job_text(p) for p in sorted(work.glob("slurm-*.out")))),
        )
    return CheckResult(
        "dependency",
        Verdict.PASS,
        f"afterok ran {gap:.2f}s after success; after a failure the dependent job stayed "
        f"{never.state} ({never.get('Reason') or 'cancelled'})",
        gap,
        "start gap",
        "s",
        job_ids=jobs,
    )


_GRANTED = re.compile(r"Granted job allocation (\d+)")


def check_salloc(ctx: CheckContext) -> CheckResult:
    """salloc over every node, then srun inside that allocation."""
    nodes = ctx.target.nodes
    done = ctx.session.run(
        [
            "salloc",
            *ctx.job_args("salloc"),
            *ctx.all_nodes_args(),
            "srun",
            "--ntasks-per-node=1",
            "sh",
            "-c",
            'echo "$SLURMD_NODENAME $SLURM_JOB_ID"',
        ],
        timeout=ctx.remaining(),
    )
    granted = _GRANTED.search(done.stderr)
    rows = [line.split() for line in done.stdout.splitlines() if len(line.split()) == 2]
    problems = []
    if done.returncode != 0:
        problems.append(f"salloc exited {done.returncode}")
    if granted is None:
        problems.append("salloc did not report a granted allocation")
    elif any(job != granted.group(1) for _, job in rows):
        problems.append(
            f"srun steps ran in jobs {sorted({job for _, job in rows})}, not allocation {granted.group(1)}"
        )
    if sorted(node for node, _ in rows) != sorted(nodes):
        problems.append(
            f"srun inside salloc reached {sorted(node for node, _ in rows)}, expected {sorted(nodes)}"
        )
    if problems:
        return _fail("salloc", "; ".join(problems), output_tail=tail(done.output))
    return CheckResult(
        "salloc",
        Verdict.PASS,
        f"allocation {granted.group(1) if granted else '?'}: srun reached all {len(nodes)} nodes",
        done.seconds,
        "salloc+srun",
        "s",
        job_ids=[granted.group(1)] if granted else [],
    )


PTY_COMMAND = b"echo MARK-$((6*7)) $SLURM_JOB_ID $(tty); exit 7\n"
_PTY_MARK = re.compile(r"MARK-42 (\d+) (/dev/\S+)")


def check_pty(ctx: CheckContext) -> CheckResult:
    """An interactive `srun --pty bash` driven through a pseudo-terminal: the shell evaluates
    input inside the job on a tty, and its exit code comes back through srun."""
    master, slave = pty.openpty()
    start = time.monotonic()
    process = subprocess.Popen(
        [
            "srun",
            *ctx.job_args("pty"),
            "--nodes=1",
            "--ntasks=1",
            "--pty",
            "bash",
            "--norc",
            "--noprofile",
            "-i",
        ],
        cwd=ctx.run_dir,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        **ctx.session.popen_kwargs(),  # type: ignore[call-overload]
    )
    os.close(slave)
    output = b""
    try:
        os.write(master, PTY_COMMAND)
        # The check's own budget: on a busy cluster the allocation alone can take a while.
        deadline = time.monotonic() + ctx.remaining()
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: the other side closed
                    break
                if not chunk:
                    break
                output += chunk
            elif process.poll() is not None:
                break
        try:
            returncode = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            stop_process_group(process)
            raise CheckTimeout(
                f"srun --pty did not end; output:\n{output.decode(errors='replace')}"
            ) from None
    finally:
        if process.poll() is None:
            stop_process_group(process)
        os.close(master)
    text = output.decode(errors="replace").replace("\r", "")
    match = _PTY_MARK.search(text)
    problems = []
    if match is None:
        problems.append("the interactive shell never evaluated the command (no MARK-42 line)")
    if returncode != 7:
        problems.append(f"srun exited {returncode}, expected the shell's exit code 7")
    if problems or match is None:
        return _fail("pty", "; ".join(problems), output_tail=tail(text))
    return CheckResult(
        "pty",
        Verdict.PASS,
        f"interactive shell in job {match.group(1)} on {match.group(2)}; exit code 7 returned",
        time.monotonic() - start,
        "session",
        "s",
        job_ids=[match.group(1)],
    )


# Task 1 says when it exits (epoch seconds), so the figure is the time from that exit to the
# step's end, not srun's whole run: waiting for an allocation on a busy cluster is no fault.
BAD_EXIT = (
    'if [ "$SLURM_PROCID" = 1 ]; then sleep 1; echo "bad-exit-at $(date +%s.%N)"; exit 3; fi; exec sleep 600'
)
BAD_EXIT_MARK = re.compile(r"^bad-exit-at (\d+\.\d+)$", re.MULTILINE)


def step_end_after_bad_exit(output: str, ended_at: float, seconds: float) -> float:
    """Seconds from the bad task's exit to the step's end; srun's whole run when it did not say."""
    found = BAD_EXIT_MARK.search(output)
    return max(0.0, ended_at - float(found.group(1))) if found else seconds


def check_kill_on_bad_exit(ctx: CheckContext) -> CheckResult:
    """Task 1 exits 3 after a second while task 0 would sleep 10 minutes: the step must end now."""
    limit = ctx.thresholds().get("kill_on_bad_exit_max_s", 30.0)
    nodes = min(2, len(ctx.target.nodes))
    configured = ctx.config.get("KillOnBadExit", "?")
    try:
        done = ctx.session.run(
            [
                "srun",
                *ctx.job_args("kill-on-bad-exit"),
                f"--nodes={nodes}",
                "--ntasks=2",
                "sh",
                "-c",
                BAD_EXIT,
            ],
            timeout=limit + 60,  # room for the allocation on a busy cluster; the figure excludes it
        )
        ended_at = time.time()
    except CheckTimeout as error:
        return _fail(
            "kill-on-bad-exit",
            f"the step kept running after one task exited 3 (KillOnBadExit={configured} in slurm.conf)",
            output_tail=str(error),
        )
    seconds = step_end_after_bad_exit(done.output, ended_at, done.seconds)
    ok = done.returncode != 0 and seconds <= limit
    reason = (
        f"step ended {seconds:.1f}s after task 1 exited 3, srun exit {done.returncode} "
        f"(KillOnBadExit={configured})"
    )
    if done.returncode == 0:
        reason = f"srun exited 0 although a task exited 3 (KillOnBadExit={configured})"
    return CheckResult(
        "kill-on-bad-exit",
        Verdict.PASS if ok else Verdict.FAIL,
        reason,
        seconds,
        "step end",
        "s",
        limit,
        "<=",
        output_tail=None if ok else tail(done.output),
    )


def missing_gpu_tres(alloc_tres: str, gres_type: str | None, count: int = 1) -> list[str]:
    """What a one-GPU job's AllocTRES (``cpu=1,gres/gpu:h100=1,gres/gpu=1,...``) lacks: gres/gpu=N,
    and gres/gpu:TYPE=N for a typed GPU (Slurm records the typed TRES only when it is listed in
    AccountingStorageTRES)."""
    entries = {entry.strip().lower() for entry in alloc_tres.split(",")}
    wanted = [f"gres/gpu={count}"] + ([f"gres/gpu:{gres_type.lower()}={count}"] if gres_type else [])
    return [entry for entry in wanted if entry not in entries]


def check_sacct(ctx: CheckContext) -> CheckResult:
    """A finished job shows up in sacct, with gres/gpu in its AllocTRES when GPUs were asked for."""
    storage = ctx.config.get("AccountingStorageType", "?")
    if not ctx.target.accounting_enabled:
        return CheckResult(
            "sacct", Verdict.SKIP, f"accounting is off for this target (AccountingStorageType={storage})"
        )
    if storage.endswith("/none"):
        return _fail(
            "sacct", f"the target expects accounting but slurm.conf has AccountingStorageType={storage}"
        )
    work = ctx.check_dir("sacct")
    gres_type = ctx.target.gres_type if ctx.target.gpus_per_node else None
    gpu = [f"--gres=gpu:{gres_type + ':' if gres_type else ''}1"] if ctx.target.gpus_per_node else []
    output = work / "slurm-%j.out"
    job = ctx.session.sbatch(
        [*ctx.job_args("sacct"), "--ntasks=1", *gpu, f"--output={output}", "--wrap", "true"], cwd=work
    )
    info = ctx.session.wait(job, ctx.remaining())
    if info.state != "COMPLETED":
        return job_failure(
            "sacct", info, Path(str(output).replace("%j", job)), "the accounting probe job failed"
        )
    start = time.monotonic()
    row: list[str] = []
    while time.monotonic() - start < min(60.0, ctx.remaining()):
        done = ctx.session.run(
            ["sacct", "-j", job, "-X", "-n", "-P", "--format=JobID,State,AllocTRES,ExitCode"], timeout=30
        )
        rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith(job)]
        if rows and rows[0][1] == "COMPLETED":
            row = rows[0]
            break
        time.sleep(1)
    lag = time.monotonic() - start
    if not row:
        return _fail(
            "sacct",
            f"job {job} completed but sacct has no COMPLETED record after {lag:.0f}s",
            job_ids=[job],
            details={"storage": storage},
        )
    missing = missing_gpu_tres(row[2], gres_type) if gpu else []
    if missing:
        wanted = ",".join(["gres/gpu", *([f"gres/gpu:{gres_type}"] if gres_type else [])])
        return _fail(
            "sacct",
            f"sacct AllocTRES {row[2]!r} lacks {' and '.join(missing)}: set AccountingStorageTRES={wanted}",
            job_ids=[job],
            details={"alloc_tres": row[2]},
        )
    return CheckResult(
        "sacct",
        Verdict.PASS,
        f"job {job} recorded: {row[1]}, AllocTRES {row[2]}",
        lag,
        "record lag",
        "s",
        job_ids=[job],
    )
