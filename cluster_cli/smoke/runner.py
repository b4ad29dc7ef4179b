"""run_smoke: set up the run directory and the test user, run the selected checks, report."""

from __future__ import annotations

import datetime as dt
import os
import secrets
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.registry import Check, select
from cluster_cli.smoke.report import CheckResult, SmokeReport, Verdict, write_json
from cluster_cli.smoke.errors import CheckTimeout, NodesUnusable, SmokeSetupError
from cluster_cli.smoke.node_states import unusable_nodes
from cluster_cli.smoke.slurm import SlurmSession
from cluster_cli.smoke.target import SmokeTarget
from cluster_cli.smoke.text import tail
from cluster_cli.smoke.users import ensure_user, make_user_dir

TORCH_PROBE = "import torch; print(torch.__version__)"


@dataclass(frozen=True)
class SmokeEvent:
    """Progress: ``start`` before a check runs, ``finish`` (with its result) after."""

    kind: Literal["start", "finish"]
    check: str
    index: int
    total: int
    result: CheckResult | None = None


ProgressCallback = Callable[[SmokeEvent], None]


def run_smoke(
    target: SmokeTarget, only: list[str] | None = None, progress: ProgressCallback | None = None
) -> SmokeReport:
    """Run the smoke checks (all, or the names in ``only``) against ``target``.

    Raises UnknownCheckError for unknown check names and SmokeSetupError when nothing can run (no
    Slurm client, controller unreachable, no usable test user). Every check yields a result,
    even when it times out or breaks; the report is also written to <run_dir>/report.json.
    """
    checks = select(only)
    started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    start = time.monotonic()
    user, created = ensure_user(target.user, target.create_user, target.user_uid, target.user_gid)
    session = SlurmSession(
        user,
        target.slurm_conf,
        job_args=target.job_args,
        partition=target.partition,
        accounting=target.accounting_enabled,
    )
    config = session.show_config()
    run_id = dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
    run_dir = target.work_dir / f"run-{run_id}"
    if not target.work_dir.exists():
        make_user_dir(target.work_dir, user)
    make_user_dir(run_dir, user)
    session.cwd = run_dir
    needs_torch = target.torch_installed and any(check.needs_torch for check in checks)
    # Only the training checks need the scripts (an installed package may not ship them).
    training_dir = (
        _copy_training(target.training_dir, run_dir / "training") if needs_torch else target.training_dir
    )
    ctx = CheckContext(target, session, run_id, run_dir, training_dir, config)
    ctx.unusable_nodes = _unusable_nodes(session, target.nodes)
    if needs_torch:
        ctx.torch_problem = _probe_torch(ctx)
    results: list[CheckResult] = []
    try:
        for index, check in enumerate(checks):
            if progress:
                progress(SmokeEvent("start", check.name, index, len(checks)))
            if check.needs_torch and not target.torch_installed:
                result = CheckResult(check.name, Verdict.SKIP,
                                     "the training environment has no torch (training.torch_version: null)")
            else:
                result = _run_one(check, ctx)
            results.append(result)
            if progress:
                progress(SmokeEvent("finish", check.name, index, len(checks), result))
    finally:
        session.cancel_by_name_prefix(f"smoke-{run_id}")
    summary = target.summary()
    summary.update(
        user_created=created, slurm_version=config.get("SLURM_VERSION"), cluster=config.get("ClusterName")
    )
    report = SmokeReport(results, started_at, time.monotonic() - start, summary, str(run_dir))
    write_json(report, run_dir / "report.json")
    return report


def _run_one(check: Check, ctx: CheckContext) -> CheckResult:
    began = time.monotonic()
    ctx.deadline = began + ctx.target.check_timeout_s
    try:
        result = check.run(ctx)
    except CheckTimeout as error:
        result = CheckResult(
            check.name, Verdict.FAIL, f"timed out: {str(error).splitlines()[0]}", output_tail=str(error)
        )
    except NodesUnusable as error:
        result = CheckResult(check.name, Verdict.FAIL, str(error))
    except Exception as error:  # noqa: BLE001 - one broken check must not end the suite
        result = CheckResult(
            check.name,
            Verdict.FAIL,
            f"the check itself broke: {type(error).__name__}: {error}",
            output_tail=tail(traceback.format_exc(), 25),
        )
    result.name = check.name
    result.duration_s = time.monotonic() - began
    return result


def _copy_training(source: Path, destination: Path) -> Path:
    """Copy the scripts into the shared run directory, so every node runs the same bytes."""
    if not (source / "launch.sh").is_file():
        raise SmokeSetupError(f"training scripts not found in {source} (SmokeTarget.training_dir)")
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in [destination, *destination.rglob("*")]:
        path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return destination


def _unusable_nodes(session: SlurmSession, nodes: list[str], settle_s: float = 15.0) -> dict[str, str]:
    """Nodes that cannot take jobs, after giving transient states (a node just resumed shows
    ``idle*`` until its slurmd re-registers) up to ``settle_s`` to clear."""
    deadline = time.monotonic() + settle_s
    while True:
        unusable = unusable_nodes(nodes, session.node_states(nodes))
        if not unusable or time.monotonic() > deadline:
            return unusable
        time.sleep(1.0)


def _probe_torch(ctx: CheckContext) -> str | None:
    """Can the target's python import torch on a node? One answer instead of five failed jobs."""
    python = ctx.target.python
    try:
        done = ctx.session.run(
            ["srun", *ctx.job_args("torch-probe"), "--nodes=1", "--ntasks=1", python, "-c", TORCH_PROBE],
            timeout=min(120.0, ctx.target.check_timeout_s),
        )
    except CheckTimeout as error:
        return f"probing torch on a node timed out: {str(error).splitlines()[0]}"
    if done.returncode != 0:
        return f"{python} cannot import torch on the nodes (SmokeTarget.python): {tail(done.output, 3)}"
    return None
