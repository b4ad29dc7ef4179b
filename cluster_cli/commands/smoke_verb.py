"""`cluster-cli smoke`: the post-install checks and training jobs, here or on the submit host."""

from __future__ import annotations

from pathlib import Path

import click

from cluster_cli.errors import ExitCode


@click.command()
@click.argument("inventory", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--only", help="Comma-separated checks to run (default: all). See --list.")
@click.option(
    "--partition",
    help="Partition to test, or 'all' (the default): each one's cluster checks, then each node group's.",
)
@click.option(
    "--sample", type=click.IntRange(min=1), default=2, show_default=True,
    help="Nodes per group the per-group checks use (the srun check and --all-nodes reach every node).",
)
@click.option(
    "--all-nodes", "all_nodes", is_flag=True,
    help="Check every node of each group, one step per group (hostname, GPUs, binding); with --only too.",
)
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Write the JSON report here.")
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False, path_type=Path), help="Write a JUnit XML report here.")
@click.option(
    "--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report as one self-contained HTML page here (verdicts, figures, charts).",
)
@click.option(
    "--from-json", "saved_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Run nothing: write --html from this saved JSON report.",
)
@click.option(
    "--compare", "earlier_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="An earlier JSON report: --html shows each figure beside its earlier value.",
)
@click.option("--timeout", "timeout_s", type=float, default=180.0, show_default=True, help="Seconds any one check may take.")
@click.option("--list", "list_checks", is_flag=True, help="List the checks and exit.")
@click.option(
    "--submit-host",
    "submit_host_name",
    help="Inventory host to submit the jobs from (default: the first login host, else the primary controller).",
)
def smoke(
    inventory: Path | None, only: str | None, partition: str | None, sample: int, all_nodes: bool,
    json_path: Path | None, junit_path: Path | None, html_path: Path | None, saved_path: Path | None,
    earlier_path: Path | None, timeout_s: float, list_checks: bool, submit_host_name: str | None,
) -> None:
    """Run the post-install smoke jobs as an unprivileged user; exit 0 only if none failed.

    Jobs are submitted from the submit host: here when its connection is local, otherwise over
    SSH (the suite is copied there for the run and removed afterwards).
    """
    from cluster_cli.loader import load_cluster
    from cluster_cli.progress import SmokeProgress
    from cluster_cli.smoke import CHECKS, format_table, run_smoke, write_json, write_junit
    from cluster_cli.smoke_control.html_report import read_report, write_html
    from cluster_cli.smoke.registry import select as select_checks
    from cluster_cli.smoke_control.remote import run_remote_smoke, submit_host
    from cluster_cli.smoke_control.inventory_targets import smoke_plan
    from rich.console import Console
    if list_checks:
        for check in CHECKS:
            by_name = "" if check.default else " (asked for by name)"
            click.echo(f"{check.name:18} {check.scope:10} {check.summary}{by_name}")
        return
    if saved_path is not None:
        if html_path is None:
            raise click.UsageError("--from-json needs --html: it writes the saved report as a page and runs nothing.")
        write_html(read_report(saved_path), html_path, earlier_path)
        click.echo(f"HTML report: {html_path}")
        return
    if inventory is None:
        raise click.UsageError("Missing argument 'INVENTORY' (only --list and --from-json run without one).")
    cluster = load_cluster(inventory)
    console = Console(highlight=False)
    names = [name.strip() for name in only.split(",") if name.strip()] if only else None
    if all_nodes:
        names = [*(names or []), "all-nodes"]
    select_checks(names)  # an unknown name is a usage error before anything runs, here or remote
    target = smoke_plan(cluster, partition, sample, timeout_s)
    host = submit_host(cluster, submit_host_name)
    if host.connection == "local":
        report = run_smoke(target, names, SmokeProgress(console))
    else:
        console.print(f"submitting from {host.name} ({host.address}) over SSH")
        report = run_remote_smoke(host, target, names, SmokeProgress(console))
    console.print(format_table(report), markup=False)
    if json_path:
        write_json(report, json_path)
        console.print(f"JSON report: {json_path}")
    if junit_path:
        write_junit(report, junit_path)
        console.print(f"JUnit report: {junit_path}")
    if html_path:
        write_html(report, html_path, earlier_path)
        console.print(f"HTML report: {html_path}")
    counts = report.counts
    console.print(
        f"smoke: {counts.get('pass', 0)} passed, {counts.get('fail', 0)} failed, {counts.get('skip', 0)} skipped "
        f"in {report.duration_s:.0f} s (run directory {report.run_dir})"
    )
    if not report.ok:
        raise SystemExit(ExitCode.FAILURE)
