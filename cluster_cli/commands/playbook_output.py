"""A playbook run on the terminal: the verb's header, live per-host progress, the summary, each
failed host with its daemon logs; shared by `deploy`, `teardown` and `upgrade`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cluster_cli.errors import ClusterCliError

if TYPE_CHECKING:
    from rich.console import Console

    from cluster_cli import deploy as deploy_steps
    from cluster_cli.ansible.runner import PlaybookOptions, PlaybookResult, TaskFailure


def run_playbook(
    inventory: Path, playbook: str, title: str, build_dir: Path | None, options: PlaybookOptions,
    verbose: int, extra_vars: dict[str, object] | None = None,
) -> PlaybookResult:
    from cluster_cli import deploy as deploy_steps
    from cluster_cli.loader import load_cluster
    from rich.console import Console
    cluster = load_cluster(inventory)
    console = Console(highlight=False)
    prepared = deploy_steps.prepare(cluster, inventory, build_dir)
    print_header(console, title, prepared)
    return run_prepared(console, prepared, playbook, title, options, verbose, extra_vars)


def print_header(console: Console, title: str, prepared: deploy_steps.Prepared) -> None:
    cluster = prepared.cluster
    console.print(f"{title} cluster '{cluster.name}' ({len(cluster.hosts)} hosts, {len(cluster.nodes)} nodes)")
    console.print(f"rendered configuration: {prepared.build.directory}")


def run_prepared(
    console: Console, prepared: deploy_steps.Prepared, playbook: str, title: str, options: PlaybookOptions,
    verbose: int, extra_vars: dict[str, object] | None = None,
    log_role: Callable[[TaskFailure], str | None] | None = None,
    closing: Callable[[PlaybookResult], None] | None = None,
) -> PlaybookResult:
    """Run a playbook with live progress, then its summary and failures; ``closing`` (deploy: the
    rollout's counts and its record) runs whatever the outcome, before a failure is raised."""
    from cluster_cli import deploy as deploy_steps
    from cluster_cli.progress import PlaybookProgress, summary_line, summary_table
    progress = PlaybookProgress(console, verbose=verbose > 0)
    extra_files = deploy_steps.write_extra_vars(prepared, extra_vars) if extra_vars else None
    try:
        result = deploy_steps.run(prepared, playbook, options, progress, extra_files)
    finally:
        progress.close()
    console.print(summary_table(result, summary_line(title, result)))
    for missed in result.missed:
        console.print(f"[yellow]{missed.host}: unreachable, left as it is: {missed.task}[/yellow]")
    print_failures(console, prepared, result, log_role)
    if closing is not None:
        closing(result)
    console.print(f"full log: {result.log_path}")
    if not result.ok:
        raise ClusterCliError(f"{title.lower()} failed (ansible-playbook exit {result.returncode})")
    return result


def print_failures(
    console: Console, prepared: deploy_steps.Prepared, result: PlaybookResult,
    log_role: Callable[[TaskFailure], str | None] | None,
) -> None:
    """Each failed or unreachable host with the play and task that stopped it, its message, and
    the last lines of the daemon logs it concerns (the task's role, or ``log_role``'s answer for
    tasks outside the roles), those of the first LOG_TAIL_HOSTS hosts only."""
    from cluster_cli import deploy as deploy_steps
    from cluster_cli.rollout import stopping_failures
    from dataclasses import replace
    failures = stopping_failures(result)
    if failures:
        console.print(f"[red]failed hosts ({len(failures)}):[/red]")
    for number, failure in enumerate(failures):
        if log_role is not None:
            failure = replace(failure, role=log_role(failure) or failure.role)
        what = "unreachable" if failure.unreachable else "failed"
        where = f'play "{failure.play}", ' if failure.play else ""
        console.print(f'[red]{failure.host}: {what}: {where}task "{failure.task}"[/red]', highlight=False)
        if failure.message:
            console.print(failure.message, markup=False)
        if number == deploy_steps.LOG_TAIL_HOSTS:
            console.print(f"(daemon logs of the first {deploy_steps.LOG_TAIL_HOSTS} failed hosts only)")
        if number >= deploy_steps.LOG_TAIL_HOSTS:
            continue
        for path, text in deploy_steps.failure_log_tails(prepared, failure):
            console.print(f"--- last lines of {path} on {failure.host}:", markup=False)
            console.print(text, markup=False)
