"""The verbs of the deploy flow: `plan` (what a deploy would change) and `deploy` (deploy.py's
``deploy_cluster``, shown on the terminal)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cluster_cli.commands import playbook_output
from cluster_cli.commands.shared import build_dir_option, inventory_argument, playbook_options, rotate_option

if TYPE_CHECKING:
    from rich.console import Console

    from cluster_cli.ansible.runner import PlaybookOptions, PlaybookResult
    from cluster_cli.cluster import Cluster
    from cluster_cli.deploy import Prepared
    from cluster_cli.plan import Plan


@click.command()
@inventory_argument
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--diff/--no-diff", "show_diff", default=True, help="Show file differences (secrets masked).")
@build_dir_option
@rotate_option
def plan(inventory: Path, as_json: bool, show_diff: bool, build_dir: Path | None, rotate_secrets: bool) -> None:
    """What deploy would change on each host, and its impact; changes nothing.

    Exit 0: nothing to change; 3: changes pending; 1: a host could not be probed or holds
    another cluster's state; 2: invalid inventory.
    """
    import json
    from cluster_cli import deploy as deploy_steps, rotation
    from cluster_cli.loader import load_cluster
    from rich.console import Console
    cluster = load_cluster(inventory)
    prepared = deploy_steps.prepare(cluster, inventory, build_dir)
    found, _ = deploy_steps.current_plan(prepared, rotating=rotate_secrets)
    if as_json:
        document = found.to_json()
        if rotate_secrets:
            document["secrets_rotate"] = rotation.plan_lines(cluster, dry_run=True)
        click.echo(json.dumps(document, indent=2, sort_keys=True))
    else:
        print_plan_and_rotation(Console(highlight=False), found, show_diff, cluster if rotate_secrets else None,
                                dry_run=True)
    raise SystemExit(deploy_steps.plan_exit_code(found, rotate_secrets))


@click.command()
@inventory_argument
@playbook_options
@click.option("--full", is_flag=True, help="Run the whole playbook on every host, even when the plan finds nothing.")
@click.option("--wait", "wait_s", type=float, help="Wait up to SECONDS for the jobs on nodes being removed.")
@click.option("--force", is_flag=True, help="Requeue the jobs on nodes being removed.")
@click.option("--batch", type=click.IntRange(min=1), metavar="N",
              help="Restart at most N slurmd at a time: the compute hosts in waves, each waited for until "
                   "slurmctld sees it again (default: the inventory's deploy.batch, else all at once).")
@click.option("--max-fail-percentage", "max_fail", type=click.IntRange(0, 100), metavar="P",
              help="Stop the rollout when more than P% of a wave of compute hosts failed (default: the "
                   "inventory's deploy.max_fail_percentage, else 0 with --batch and 100 without).")
@rotate_option
def deploy(
    inventory: Path, check: bool, diff: bool, limit: str | None, tags: str | None, verbose: int,
    build_dir: Path | None, full: bool, wait_s: float | None, force: bool, batch: int | None,
    max_fail: int | None, rotate_secrets: bool,
) -> None:
    """Validate, render, plan, and apply what the plan says (all of site.yml with --full).

    --check prints the plan and changes nothing (with --full: Ansible's check mode).
    """
    from cluster_cli import deploy as deploy_steps, rotation
    from cluster_cli.loader import load_cluster
    from rich.console import Console
    if rotate_secrets:
        rotation.check_scope(limit, tags)
    cluster = load_cluster(inventory)
    request = deploy_steps.DeployRequest(
        check=check, diff=diff, limit=limit, tags=tags, verbose=verbose, full=full, wait_s=wait_s, force=force,
        batch=batch, max_fail=max_fail, rotate_secrets=rotate_secrets,
    )
    code = deploy_steps.deploy_cluster(cluster, inventory, build_dir, request, TerminalDeployView(Console(highlight=False)))
    if code is not None:
        raise SystemExit(code)


class TerminalDeployView:
    """deploy.py's DeployView on the terminal (rich)."""

    def __init__(self, console: Console):
        self.console = console

    def print(self, text: str, *, markup: bool = True, soft_wrap: bool = False) -> None:
        self.console.print(text, markup=markup, soft_wrap=soft_wrap)

    def header(self, prepared: Prepared) -> None:
        playbook_output.print_header(self.console, "Deploy", prepared)

    def plan(self, found: Plan, diff: bool, rotating: Cluster | None, dry_run: bool) -> None:
        print_plan_and_rotation(self.console, found, diff, rotating, dry_run)

    def refused_plan(self, found: Plan) -> None:
        from cluster_cli.progress import print_plan
        print_plan(self.console, found, False)

    def rollout(self, rollout_vars: dict[str, int]) -> None:
        threshold = rollout_vars["deploy_max_fail_percentage"]
        if "deploy_slurmd_serial" not in rollout_vars:
            if threshold < 100:
                self.console.print(f"compute hosts: all at once; the rollout stops when more than {threshold}% of them "
                                   "failed")
            return
        self.console.print(f"slurmd restarts: {rollout_vars['slurmd_restart_batch']} per host at a time, "
                           f"{rollout_vars['deploy_slurmd_serial']} compute host(s) per wave; the rollout stops when "
                           f"more than {threshold}% of a wave failed, or all of its hosts")

    def run_site(
        self, prepared: Prepared, options: PlaybookOptions, verbose: int, extra_vars: dict[str, object],
        closing: Callable[[PlaybookResult], None],
    ) -> PlaybookResult:
        return playbook_output.run_prepared(self.console, prepared, "site.yml", "Deploy", options, verbose, extra_vars,
                                            closing=closing)


def print_plan_and_rotation(console: Console, found: Plan, diff: bool, rotating: Cluster | None, dry_run: bool) -> None:
    """The plan, and what a rotation of the secrets adds to it (``rotating``: its cluster)."""
    from cluster_cli import rotation
    from cluster_cli.progress import print_plan
    print_plan(console, found, diff)
    for line in rotation.plan_lines(rotating, dry_run) if rotating else []:
        console.print(line, markup=False, soft_wrap=True)
