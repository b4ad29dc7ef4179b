"""The verbs that ask a running cluster how it is: `status` and `health` (which drains and resumes
nodes as slurmd's own health check run would, unless --no-act)."""

from __future__ import annotations

from pathlib import Path

import click

from cluster_cli.commands.shared import inventory_argument, require_owned
from cluster_cli.errors import ExitCode


@click.command()
@inventory_argument
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def status(inventory: Path, as_json: bool) -> None:
    """Controller, node states and accounting, as the cluster reports them (exit 1 if unhealthy)."""
    import json
    from cluster_cli.loader import load_cluster
    from cluster_cli.progress import daemon_lines, node_table
    from cluster_cli.status import collect_status
    from rich.console import Console
    report = collect_status(load_cluster(inventory))
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        console = Console(highlight=False)
        up = "[green]up[/green]" if report.controller_up else "[red]down[/red]"
        console.print(f"cluster {report.cluster}: slurmctld on {report.controller_host} {up} {report.controller_message}")
        if report.accounting_enabled:
            acct = "[green]ok[/green]" if report.accounting_up else "[red]unavailable[/red]"
            console.print(f"accounting: {acct} ({report.accounting_message})")
        console.print(node_table(report))
        for line in daemon_lines(report):
            console.print(line)
        for evidence in report.stranded:
            console.print(f"allocated with no job: {evidence}", style="red", markup=False, soft_wrap=True)
        verdict = "[green]healthy[/green]" if report.healthy else "[red]unhealthy[/red]"
        console.print(f"cluster is {verdict}")
    if not report.healthy:
        raise SystemExit(ExitCode.FAILURE)


@click.command()
@inventory_argument
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
@click.option("--no-act", is_flag=True, help="Only report: drain and resume nothing.")
def health(inventory: Path, as_json: bool, no_act: bool) -> None:
    """Run the node health check on every node now; exit 0 if all pass, 1 if any fails.

    As slurmd's periodic run does, a failing node is drained ('cluster-cli health: EVIDENCE') and a
    node the check drained is resumed once it passes; a drain with any other reason is left alone.
    --no-act only reports.
    """
    import json
    from cluster_cli.health import run_health, verdict_line
    from cluster_cli.loader import load_cluster
    from cluster_cli.probe import controller_hosts
    cluster = load_cluster(inventory)
    if not no_act:
        require_owned(cluster, inventory, controller_hosts(cluster))
    report = run_health(cluster, act=not no_act)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, sort_keys=True))
    else:
        for verdict in report.nodes:
            click.echo(verdict_line(verdict))
        for evidence in report.stranded:
            click.echo(f"allocated with no job: {evidence}")
        failed = sum(not verdict.ok for verdict in report.nodes)
        click.echo(f"health: {len(report.nodes) - failed} of {len(report.nodes)} nodes pass"
                   + ("" if report.acted else " (reported only: nothing drained or resumed)"))
    if not report.healthy:
        raise SystemExit(ExitCode.FAILURE)
