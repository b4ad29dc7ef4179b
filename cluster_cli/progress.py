"""Live per-host progress of a playbook run, and its closing summary."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from cluster_cli.ansible.runner import PlaybookResult
from cluster_cli.plan import Impact, Plan
from cluster_cli.smoke import SmokeEvent
from cluster_cli.status import ClusterStatus


class PlaybookProgress:
    """Prints the current task, and every change or failure as it happens, per host."""

    def __init__(self, console: Console, verbose: bool = False):
        self.console = console
        self.verbose = verbose
        self.task = ""
        self.status = console.status("starting ansible-playbook") if console.is_terminal else None
        if self.status is not None:
            self.status.start()

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "play":
            self._print(f"[bold]PLAY[/bold] {event.get('name', '')}")
        elif kind == "task":
            self.task = str(event.get("name", ""))
            if self.status is not None:
                self.status.update(f"{self.task}")
            elif self.verbose:
                self._print(f"  task: {self.task}")
        elif kind == "ok" and (event.get("changed") or self.verbose):
            state = "[yellow]changed[/yellow]" if event.get("changed") else "[green]ok[/green]"
            self._print(f"  {event['host']}: {state}: {event['task']}")
        elif kind == "stopped":
            self._print("[red]Ansible stopped the run: more hosts of a wave failed than its threshold allows, "
                        "or every host of the play or wave failed[/red]")
        elif kind in ("failed", "unreachable"):
            if event.get("ignored"):
                return
            self._print(f"  {event['host']}: [red]{kind.upper()}[/red]: {event['task']}")
            message = str(event.get("message", "")).strip()
            if message:
                for line in message.splitlines()[-8:]:
                    self.console.print(f"      {line}", markup=False, highlight=False)

    def _print(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()


def summary_line(verb: str, result: PlaybookResult) -> str:
    """The run's closing line, "Deploy: <seconds> s, <n> changed" (devtools.deploy_summary reads it back)."""
    return f"{verb}: {result.duration_s:.1f} s, {result.changed} changed"


def summary_table(result: PlaybookResult, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("host", "ok", "changed", "failed", "unreachable", "skipped"):
        table.add_column(column, justify="left" if column == "host" else "right")
    for host, counts in sorted(result.recap.items()):
        table.add_row(
            host,
            str(counts.get("ok", 0)),
            str(counts.get("changed", 0)),
            str(counts.get("failures", 0)),
            str(counts.get("unreachable", 0)),
            str(counts.get("skipped", 0)),
        )
    return table


def node_table(report: ClusterStatus) -> Table:
    table = Table(title_justify="left")
    for column in ("node", "state", "gres", "reason"):
        table.add_column(column)
    dead = {daemon.daemon.removeprefix("slurmd@"): daemon.problem for daemon in report.failed_daemons}
    for node in report.nodes:
        state = f"{node.state} [red](slurmd {dead[node.name]})[/red]" if node.name in dead else node.state
        table.add_row(node.name, state, node.gres, node.reason)
    for name in report.missing_nodes:
        table.add_row(name, "[red]not in sinfo[/red]", "", "")
    return table


def daemon_lines(report: ClusterStatus) -> list[str]:
    """A line per daemon that does not run or listen; one line when they all do."""
    if not report.failed_daemons:
        return [f"daemons: all {len(report.daemons)} running and listening"]
    return [f"[red]{daemon.daemon}[/red] on {daemon.host}: {daemon.problem}" for daemon in report.failed_daemons]


class SmokeProgress:
    """One line per finished check: verdict, figure, time."""

    def __init__(self, console: Console):
        self.console = console

    def __call__(self, event: SmokeEvent) -> None:
        where = f" on {event.scope}" if event.scope else ""
        if event.kind == "start":
            self.console.print(f"[{event.index + 1}/{event.total}] {event.check}{where} ...", highlight=False)
            return
        result = event.result
        if result is None:
            return
        colour = {"pass": "green", "fail": "red", "skip": "yellow"}.get(result.verdict.value, "white")
        self.console.print(
            f"[{event.index + 1}/{event.total}] {event.check}{where}: [{colour}]{result.verdict.value}[/{colour}] "
            f"({result.duration_s:.1f} s)",
            highlight=False,
        )


IMPACT_STYLE = {"none": "green", "reconfigure": "cyan", "drift": "red", "node remove": "magenta"}


def plan_table(plan: Plan) -> Table:
    """One row per change: host, what, impact class, why."""
    table = Table(title=f"plan for cluster '{plan.cluster}' (Slurm {plan.slurm_version or 'not installed'})",
                  title_justify="left")
    for column in ("host", "what", "impact", "detail"):
        table.add_column(column)
    for change in plan.changes:
        style = IMPACT_STYLE.get(change.impact.value, "yellow")
        detail = _first_cause(change.detail) if change.impact in CAUSE_LISTS else change.detail
        table.add_row(change.host, change.subject, f"[{style}]{change.impact.value}[/{style}]", detail)
    return table


# Impacts whose detail lists every cause or item ("; "): the table shows the first and a count.
CAUSE_LISTS = frozenset({Impact.RECONFIGURE, Impact.RESTART_SLURMCTLD, Impact.RESTART_SLURMD, Impact.RESTART_SLURMDBD,
                         Impact.PEOPLE})


def _first_cause(detail: str) -> str:
    """A restart's first cause, and how many more (`plan --json` lists them all)."""
    causes = detail.split("; ")
    return causes[0] + (f" (+{len(causes) - 1} more)" if len(causes) > 1 else "")


def print_plan(console: Console, plan: Plan, show_diff: bool) -> None:
    for host, reason in sorted(plan.unreachable.items()):
        console.print(f"[red]{host}: cannot be probed: {reason}[/red]")
    for conflict in plan.conflicts:
        console.print(f"[red]conflict: {conflict}[/red]")
    for evidence in plan.stranded:
        console.print(f"allocated with no job: {evidence}", style="red", markup=False, soft_wrap=True)
    if plan.unrecorded:
        console.print(f"the deploy record does not know {', '.join(plan.unrecorded)}, which hold this cluster's "
                      "slurm.conf and munge key: deploy records them from what they hold", markup=False, soft_wrap=True)
    if plan.changes:
        console.print(plan_table(plan))
    if show_diff:
        for change in plan.changes:
            if change.diff:
                console.print(f"--- {change.host}: {change.subject}", markup=False)
                console.print(change.diff, markup=False, soft_wrap=True)
    for note in plan.notes:
        console.print(note, markup=False, soft_wrap=True)
    running = len(plan.jobs)
    console.print(f"{len(plan.changes)} change{'s' if len(plan.changes) != 1 else ''} pending; "
                  f"{running} running job{'s' if running != 1 else ''}")
