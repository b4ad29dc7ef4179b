"""The mpi check: srun starts an MPI program (training/mpi_check.py, mpi4py) over two nodes with
the cluster's MPI plugin; the all-reduce must be exact, and the latency between two nodes is
reported. (A plain srun of a program that is not MPI is the srun check, under the same MpiDefault.)"""

from __future__ import annotations

import json
from typing import Any

from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.text import tail

PROGRAM = "mpi_check.py"
RESULT_MARK = "mpi-result "
NODES = 2
TASKS_PER_NODE = 2


def check_mpi(ctx: CheckContext) -> CheckResult:
    """``srun --mpi=PLUGIN --nodes=2 --ntasks-per-node=2`` of the MPI program, judged by its result line."""
    target = ctx.target
    if target.mpi_plugin is None:
        return CheckResult("mpi", Verdict.SKIP, "MPI is off in the inventory (mpi.enabled): no MPI plugin or library")
    if not target.mpi4py:
        return CheckResult("mpi", Verdict.SKIP, "the training environment has no mpi4py (mpi.mpi4py_version: null)")
    if len(target.nodes) < NODES:
        return CheckResult("mpi", Verdict.SKIP, f"needs {NODES} nodes (this partition has {len(target.nodes)})")
    tasks = max(1, min(TASKS_PER_NODE, target.cpus_per_node))
    program = ctx.write_script("mpi", PROGRAM, (ctx.training_dir / PROGRAM).read_text(encoding="utf-8"))
    done = ctx.session.run(
        ["srun", *ctx.job_args("mpi"), f"--mpi={target.mpi_plugin}", f"--nodes={NODES}",
         f"--ntasks-per-node={tasks}", target.python, str(program)],
        timeout=ctx.remaining(),
        cwd=program.parent,
    )
    result = _result_line(done.stdout)
    if done.returncode != 0 or result is None:
        return CheckResult("mpi", Verdict.FAIL, f"srun --mpi={target.mpi_plugin} over {NODES} nodes exited "
                           f"{done.returncode}" + ("" if result else ", no result line"), output_tail=tail(done.output))
    return judge_mpi(result, NODES * tasks, target.mpi_plugin)


def _result_line(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARK):
            try:
                found = json.loads(line.removeprefix(RESULT_MARK))
            except json.JSONDecodeError:
                return None
            return found if isinstance(found, dict) else None
    return None


def judge_mpi(result: dict[str, Any], ranks: int, plugin: str) -> CheckResult:
    """Every rank in one MPI world over two nodes, the all-reduce exact, a latency measured."""
    details = {key: result.get(key) for key in ("size", "nodes", "sum", "latency_us", "library")}
    details["plugin"] = plugin
    problems = []
    if result.get("size") != ranks:
        problems.append(f"MPI_COMM_WORLD has {result.get('size')} ranks, srun started {ranks} (the MPI library did "
                        "not get its world from Slurm's plugin)")
    if result.get("sum") != result.get("expected_sum"):
        problems.append(f"all-reduce gave {result.get('sum')}, expected {result.get('expected_sum')}")
    nodes = result.get("nodes") or {}
    if len(nodes) < NODES or result.get("latency_us") is None:
        problems.append(f"ranks on {sorted(nodes)}: no two nodes to measure between")
    if problems:
        return CheckResult("mpi", Verdict.FAIL, "; ".join(problems), details=details)
    latency = float(result["latency_us"])
    return CheckResult(
        "mpi", Verdict.PASS,
        f"{ranks} ranks on {len(nodes)} nodes (--mpi={plugin}): all-reduce exact; {latency:.1f} us between nodes",
        latency, "latency", "us", details=details,
    )
