"""run_smoke: set up the run directory and the test user, run the selected checks, report."""

from __future__ import annotations

import dataclasses
import datetime as dt
import secrets
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.registry import Check, select
from cluster_cli.smoke.report import CheckResult, SmokeReport, Verdict, json_text
from cluster_cli.smoke.suite_errors import CheckTimeout, NodesUnusable, SmokeSetupError
from cluster_cli.node_states import unusable_nodes
from cluster_cli.smoke.slurm import SlurmSession, User
from cluster_cli.smoke.target import SmokeTarget
from cluster_cli.smoke.text import tail
from cluster_cli.smoke.userdir import UserDir
from cluster_cli.smoke.users import ensure_user

TORCH_PROBE = "import torch; print(torch.__version__)"


@dataclass(frozen=True)
class SmokeEvent:
    """Progress: ``start`` before a check runs, ``finish`` (with its result) after; ``scope`` is
    where it runs (``gpu/h100``), "" for a plain target."""

    kind: Literal["start", "finish"]
    check: str
    index: int
    total: int
    result: CheckResult | None = None
    scope: str = ""


ProgressCallback = Callable[[SmokeEvent], None]


def run_smoke(
    target: SmokeTarget | Sequence[SmokeTarget],
    only: list[str] | None = None,
    progress: ProgressCallback | None = None,
) -> SmokeReport:
    """Run the smoke checks (all, or the names in ``only``) against ``target``: one target, or
    several (one per partition and per node group, see ``cluster_cli.smoke_control.inventory_targets``),
    each running the checks of its scope.

    Raises UnknownCheckError for unknown check names and SmokeSetupError when nothing can run (no
    Slurm client, controller unreachable, no usable test user). Every check yields a result,
    even when it times out or breaks; the report is also written to <run_dir>/report.json.
    """
    targets = [target] if isinstance(target, SmokeTarget) else list(target)
    if not targets:
        raise SmokeSetupError("nothing to test: no smoke target")
    checks = select(only)
    plan = [(each, [check for check in checks if check.applies_to(each)]) for each in targets]
    plan = [(each, scoped) for each, scoped in plan if scoped]
    first = targets[0]
    started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    start = time.monotonic()
    user, created = ensure_user(first.user, first.create_user, first.user_uid, first.user_gid)
    probe = SlurmSession(user, first.slurm_conf)
    config = probe.show_config()
    run_id = dt.datetime.now().strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
    with _open_run_dir(first.work_dir, f"run-{run_id}", user) as run_home:
        needs_torch = any(
            each.torch_installed and any(check.needs_torch for check in scoped) for each, scoped in plan
        )
        # Only the training checks need the scripts (an installed package may not ship them).
        training_dir = _copy_training(first.training_dir, run_home) if needs_torch else first.training_dir
        counter = _Counter(sum(len(scoped) for _, scoped in plan), progress)
        # Node states once for the whole run: one sinfo (and one settling wait) for every scope.
        probe.cwd = run_home.path
        unusable = _unusable_nodes(probe, sorted({node for each, _ in plan for node in each.nodes}))
        results: list[CheckResult] = []
        for each, scoped in plan:
            ctx = _scope_context(each, user, run_id, run_home, training_dir, config, unusable)
            if each.torch_installed and any(check.needs_torch for check in scoped):
                ctx.torch_problem = _probe_torch(ctx)
            results.extend(_run_checks(scoped, ctx, counter))
        summary = first.summary() if len(targets) == 1 else _run_summary(targets)
        summary.update(
            user_created=created, slurm_version=config.get("SLURM_VERSION"), cluster=config.get("ClusterName")
        )
        report = SmokeReport(results, started_at, time.monotonic() - start, summary, str(run_home.path))
        run_home.write_file("report.json", json_text(report).encode())
    return report


def _run_summary(targets: list[SmokeTarget]) -> dict[str, Any]:
    """The report's target for a run over several scopes: what they share, and each scope."""
    first = targets[0].summary()
    shared = {key: first[key] for key in ("work_dir", "user", "python", "check_timeout_s", "accounting_enabled")}
    per_scope = ("partition", "group", "scope", "nodes", "sample", "gpus_per_node", "gpu_type", "gres_type",
                 "fake_gpus", "thresholds")
    scopes = [{key: each.summary()[key] for key in per_scope} for each in targets]
    return {**shared, "partitions": sorted({each.partition or "" for each in targets}), "scopes": scopes}


@dataclass
class _Counter:
    """Numbers the checks across every scope for the progress events."""

    total: int
    progress: ProgressCallback | None
    index: int = 0

    def emit(
        self, kind: Literal["start", "finish"], check: str, scope: str, result: CheckResult | None = None
    ) -> None:
        if self.progress:
            self.progress(SmokeEvent(kind, check, self.index, self.total, result, scope))
        if kind == "finish":
            self.index += 1


def _scope_context(
    target: SmokeTarget,
    user: User,
    run_id: str,
    run_home: UserDir,
    training_dir: Path,
    config: dict[str, str],
    unusable_in_run: dict[str, str],
) -> CheckContext:
    """A session on the target's partition; for a group, the sample of its nodes the checks use."""
    session = SlurmSession(
        user, target.slurm_conf, job_args=target.job_args, partition=target.partition,
        accounting=target.accounting_enabled,
    )
    session.cwd = run_home.path
    every = list(target.nodes)
    unusable = {node: state for node, state in unusable_in_run.items() if node in every}
    sample = choose_sample(every, unusable, target.sample)
    sampled = dataclasses.replace(target, nodes=sample) if sample != every else target
    ctx = CheckContext(sampled, session, run_id, run_home, training_dir, config)
    ctx.unusable_nodes = {node: state for node, state in unusable.items() if node in sample}
    ctx.every_node, ctx.every_unusable = every, unusable
    if target.scope != "whole":
        ctx.prefix = ".".join(part for part in (target.partition, target.group) if part) + "-"
    if target.scope == "group":
        ctx.exclude = [*target.exclude_nodes, *(node for node in every if node not in sample)]
    return ctx


def choose_sample(nodes: list[str], unusable: dict[str, str], size: int | None) -> list[str]:
    """The first ``size`` nodes, usable ones first (a drained node is no reason to fail the
    per-group checks; the all-node checks report it); all of them when ``size`` is None."""
    if size is None or size >= len(nodes):
        return list(nodes)
    ordered = [node for node in nodes if node not in unusable] + [node for node in nodes if node in unusable]
    chosen = set(ordered[:size])
    return [node for node in nodes if node in chosen]


def _open_run_dir(work_dir: Path, name: str, user: User) -> UserDir:
    """The run directory, made in the work directory and held open (see ``userdir``)."""
    with UserDir.open_work_dir(work_dir, user) as work:
        return work.child(name)


def _run_checks(checks: list[Check], ctx: CheckContext, counter: _Counter) -> list[CheckResult]:
    results: list[CheckResult] = []
    scope = "" if ctx.target.scope == "whole" else ctx.target.label
    try:
        for check in checks:
            counter.emit("start", check.name, scope)
            if check.needs_torch and not ctx.target.torch_installed:
                result = CheckResult(check.name, Verdict.SKIP,
                                     "the training environment has no torch (training.torch_version: null)")
            else:
                result = _run_one(check, ctx)
            if ctx.target.scope != "whole":
                result.partition, result.group = ctx.target.partition, ctx.target.group
            results.append(result)
            counter.emit("finish", check.name, scope, result)
    finally:
        ctx.session.cancel_by_name_prefix(f"smoke-{ctx.run_id}")
    return results


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


def _copy_training(source: Path, run_home: UserDir) -> Path:
    """Copy the scripts into the shared run directory, so every node runs the same bytes."""
    if not (source / "launch.sh").is_file():
        raise SmokeSetupError(f"training scripts not found in {source} (SmokeTarget.training_dir)")
    with run_home.child("training") as destination:
        _copy_tree(source, destination)
        return destination.path


def _copy_tree(source: Path, destination: UserDir) -> None:
    """``source`` (root's, trusted) into ``destination`` without following anything there."""
    for entry in sorted(source.iterdir()):
        if entry.name == "__pycache__" or entry.suffix == ".pyc":
            continue
        if entry.is_dir():
            with destination.child(entry.name) as inner:
                _copy_tree(entry, inner)
        else:
            mode = 0o755 if entry.stat().st_mode & 0o111 else 0o644
            destination.write_file(entry.name, entry.read_bytes(), mode)


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
