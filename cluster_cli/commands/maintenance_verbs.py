"""The verbs that stop or upgrade a running cluster: `teardown` and `upgrade`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from cluster_cli.commands import playbook_output
from cluster_cli.commands.shared import build_dir_option, inventory_argument, require_owned
from cluster_cli.errors import ClusterCliError
from cluster_cli.paths import DEFAULT_BACKUP_DIR

if TYPE_CHECKING:
    from rich.console import Console

    from cluster_cli import deploy as deploy_steps
    from cluster_cli import upgrade as upgrade_steps
    from cluster_cli.cluster import Cluster


@click.command()
@inventory_argument
@click.option("--purge", is_flag=True, help="Also delete Slurm state, spool, logs and the accounting database "
                                            "(dumped first); asks for the cluster's name.")
@click.option("--yes", "yes_name", metavar="CLUSTER_NAME", help="Confirm --purge without asking: the cluster's name.")
@click.option("--backup-dir", default=DEFAULT_BACKUP_DIR, show_default=True,
              help="Directory on the database host for the dump --purge makes before dropping the database.")
@click.option("--limit", help="Only these hosts (Ansible --limit pattern).")
@click.option("-v", "--verbose", count=True)
def teardown(inventory: Path, purge: bool, yes_name: str | None, backup_dir: str, limit: str | None,
             verbose: int) -> None:
    """Stop every daemon of a (test) cluster; --purge also deletes its state, after asking."""
    from cluster_cli import upgrade as upgrade_steps
    from cluster_cli.ansible.runner import PlaybookOptions
    from cluster_cli.confirm import require_confirmation
    from cluster_cli.loader import load_cluster
    extra_vars: dict[str, object] = {"teardown_purge": purge}
    cluster = load_cluster(inventory)
    require_owned(cluster, inventory)
    if purge:
        require_confirmation(cluster, yes_name, "delete its state and accounting database")
        if cluster.inventory.accounting.enabled:
            dump, _ = upgrade_steps.backup_files(cluster, backup_dir)
            extra_vars["slurmdbd_teardown_dump_file"] = dump
            click.echo(f"the accounting database is dumped to {dump} (0600) on {cluster.inventory.accounting.host} "
                       "before it is dropped")
    options = PlaybookOptions(limit=limit, verbosity=max(verbose - 1, 0))
    playbook_output.run_playbook(inventory, "teardown.yml", "Teardown", None, options, verbose, extra_vars)


@click.command()
@inventory_argument
@click.option("--to", "to_version", metavar="VERSION",
              help="Debian package version to install (default: the inventory's slurm.version, which it must equal).")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True,
              help="Compute hosts whose slurmd is upgraded and restarted at once.")
@click.option("--backup-dir", default=DEFAULT_BACKUP_DIR, show_default=True,
              help="Directory on the database host (and the primary controller) for the backups.")
@click.option("--yes", "yes_name", metavar="CLUSTER_NAME", help="Confirm without asking: the cluster's name.")
@build_dir_option
@click.option("-v", "--verbose", count=True)
def upgrade(
    inventory: Path, to_version: str | None, batch: int, backup_dir: str, yes_name: str | None,
    build_dir: Path | None, verbose: int,
) -> None:
    """Upgrade Slurm in SchedMD's order: slurmdbd (after a database dump), slurmctld (backup, then
    primary), login hosts, slurmd in batches; running and pending jobs are kept.

    Exit 0: done (or nothing to upgrade); 1: a step failed (host, task and daemon log shown);
    2: refused by the preflight (nothing upgraded).
    """
    from cluster_cli import deploy as deploy_steps, upgrade as upgrade_steps
    from cluster_cli.confirm import require_confirmation
    from cluster_cli.loader import load_cluster
    from cluster_cli.ownership import expected_secrets, owner_requests, refuse_foreign
    from cluster_cli.probe import probe_cluster
    from rich.console import Console
    cluster = load_cluster(inventory)
    target = upgrade_steps.target_version(cluster, to_version)
    console = Console(highlight=False)
    prepared = deploy_steps.prepare(cluster, inventory, build_dir)
    playbook_output.print_header(console, "Upgrade", prepared)
    probes = probe_cluster(cluster, {}, owner_requests(cluster, expected_secrets(
        prepared.build.secrets.munge_key_path.read_bytes(), prepared.build.secrets.db_password())))
    refuse_foreign(cluster, probes)
    upgrade_steps.check_preflight(probes, target)
    todo = upgrade_steps.hosts_to_upgrade(probes, target)
    if not todo:
        console.print(f"every host runs Slurm {target}: nothing to upgrade")
        return
    backup_file, state_file = upgrade_steps.backup_files(cluster, backup_dir)
    run = upgrade_steps.UpgradeRun(target, batch, backup_file, state_file)
    _print_upgrade_plan(console, cluster, todo, run)
    require_confirmation(cluster, yes_name, "upgrade it")
    _run_upgrade(console, prepared, run, verbose)
    after = upgrade_steps.hosts_to_upgrade(probe_cluster(cluster, {}), target)
    if after:
        raise ClusterCliError(f"hosts still not at {target} after the upgrade: {', '.join(sorted(after))}")
    console.print(f"every host runs Slurm {target}; database dump: {backup_file}", markup=False, soft_wrap=True)


def _print_upgrade_plan(
    console: Console, cluster: Cluster, todo: dict[str, dict[str, str]], run: upgrade_steps.UpgradeRun,
) -> None:
    console.print(f"upgrade to Slurm {run.version}, in this order: slurmdbd, slurmctld (backup, then primary), "
                  f"login hosts, slurmd ({run.batch} host{'s' if run.batch > 1 else ''} at a time)")
    for host, packages in sorted(todo.items()):
        console.print(f"  {host}: " + ", ".join(f"{name} {version}" for name, version in sorted(packages.items())),
                      markup=False)
    if cluster.inventory.accounting.enabled:
        console.print(f"the accounting database is dumped first to {run.backup_file} (0600) on "
                      f"{cluster.inventory.accounting.host}", markup=False, soft_wrap=True)


def _run_upgrade(
    console: Console, prepared: deploy_steps.Prepared, run: upgrade_steps.UpgradeRun, verbose: int,
) -> None:
    """The hosts' own preflight (refusal: exit 2), then the upgrade (failure: exit 1)."""
    from cluster_cli import upgrade as upgrade_steps
    from cluster_cli.ansible.runner import PlaybookOptions
    verbosity = max(verbose - 1, 0)
    try:
        playbook_output.run_prepared(console, prepared, "upgrade.yml", "Upgrade preflight", PlaybookOptions(
            tags="preflight", verbosity=verbosity), verbose, run.extra_vars(), upgrade_steps.failure_daemon)
    except ClusterCliError:
        raise upgrade_steps.UpgradeRefused("the hosts' preflight refused the upgrade (above): nothing was upgraded") from None
    playbook_output.run_prepared(console, prepared, "upgrade.yml", "Upgrade", PlaybookOptions(
        skip_tags="preflight", verbosity=verbosity), verbose, run.extra_vars(), upgrade_steps.failure_daemon)
