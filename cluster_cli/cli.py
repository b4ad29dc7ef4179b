"""The `cluster-cli` command: lifecycle verbs over one inventory file.

Exit codes (errors.ExitCode): 0 success, 1 the operation failed, 2 bad usage or an invalid
inventory. Errors become messages and exit codes in one place, ``ClusterCliGroup.invoke``.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cluster_cli import __version__
from cluster_cli.errors import ClusterCliError, ExitCode
from cluster_cli.paths import DEFAULT_BACKUP_DIR
from cluster_cli.pydantic_plugins import skip_plugin_lookup

# Each verb imports what it needs when it runs (pydantic, YAML, rich, the deploy machinery): `--version`,
# `--help` and `render` start without the rest (tests/unit/test_cli_imports.py keeps it so).
if TYPE_CHECKING:
    from rich.console import Console

    from cluster_cli import deploy as deploy_steps
    from cluster_cli import upgrade as upgrade_steps
    from cluster_cli.ansible.runner import PlaybookOptions, PlaybookResult, TaskFailure
    from cluster_cli.cluster import Cluster
    from cluster_cli.host_files import HostFile
    from cluster_cli.plan import Plan


def _smoke_exit_code(error: Exception) -> ExitCode | None:
    """The smoke package is stdlib-only (it runs on submit hosts), so its errors are not
    ClusterCliErrors; their exit codes are set here (none before the package was imported)."""
    errors = sys.modules.get("cluster_cli.smoke.errors")
    if errors is None:
        return None
    codes: dict[type[Exception], ExitCode] = {
        errors.UnknownCheckError: ExitCode.INVALID,
        errors.SmokeSetupError: ExitCode.FAILURE,
    }
    return next((code for kind, code in codes.items() if isinstance(error, kind)), None)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while an inventory is read and rendered: nearly every object made
    then lives to the end, and the collector's passes over them grow with the heap (a third of the
    CPU time of a 50,000-node render). Reference counting still frees what is dropped."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _QuickExit:
    """Whether the verb that ran may end the process with os._exit (see `program`)."""

    allowed = False


def _allow_quick_exit() -> None:
    """Called last by a verb that leaves nothing behind but its output and its closed files."""
    _QuickExit.allowed = True


def _flushed() -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the ordinary exit reports it as before
        return False
    return True


inventory_argument = click.argument("inventory", type=click.Path(dir_okay=False, path_type=Path))


class ClusterCliGroup(click.Group):
    """The one place where errors become a message on stderr and an exit code."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ClusterCliError as error:
            click.echo(error.report(), err=True)
            ctx.exit(error.exit_code)
        except Exception as error:
            code = _smoke_exit_code(error)
            if code is None:
                raise
            click.echo(f"error: {error}", err=True)
            ctx.exit(code)


@click.group(cls=ClusterCliGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cluster-cli")
def main() -> None:
    """Provision a Slurm GPU cluster and its training stack from one inventory file."""


def program() -> None:
    """The `cluster-cli` program (console script, `python -m cluster_cli`): `main`, and after a verb
    that allowed it (`validate`, `render`) and succeeded, os._exit: the interpreter's teardown would
    free a 10,000-node cluster's heap object by object (20-25 ms CPU of a 0.4 s `render`) to no end.
    In-process callers (tests, click's CliRunner) call `main`, which never exits this way."""
    _QuickExit.allowed = False
    try:
        main()
    except SystemExit as stop:
        if _QuickExit.allowed and stop.code in (0, None) and _flushed():
            os._exit(0)
        raise


@main.command()
@inventory_argument
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def validate(inventory: Path, quiet: bool) -> None:
    """Check an inventory; report every problem as file:line: field: message."""
    skip_plugin_lookup()
    with _no_cycle_collection():  # the imports too: pydantic's model classes are made then
        from cluster_cli.loader import load_cluster
        cluster = load_cluster(inventory)
    if not quiet:
        groups = len(cluster.inventory.node_groups)
        gpus = sum(node.group.gpus.count for node in cluster.nodes if node.group.gpus)
        click.echo(
            f"{inventory}: cluster '{cluster.name}' is valid: {len(cluster.nodes)} nodes in {groups} "
            f"group{'s' if groups != 1 else ''}, {gpus} GPUs, {len(cluster.partition_nodes)} partition"
            f"{'s' if len(cluster.partition_nodes) != 1 else ''}, {len(cluster.hosts)} managed host"
            f"{'s' if len(cluster.hosts) != 1 else ''}."
        )
    _allow_quick_exit()


@main.command()
@inventory_argument
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False, path_type=Path),
    help="Build directory (default ~/.local/state/cluster-cli/CLUSTER/build).",
)
def render(inventory: Path, output: Path | None) -> None:
    """Render slurm.conf, gres.conf, cgroup.conf, topology.conf, slurmdbd.conf and the Ansible inventory."""
    skip_plugin_lookup()
    with _no_cycle_collection():
        from cluster_cli.build import build_bundle, secrets_dir_for
        from cluster_cli.loader import load_cluster
        from cluster_cli.paths import default_build_dir
        cluster = load_cluster(inventory)
        target = output or default_build_dir(cluster.name)
        bundle = build_bundle(cluster, target, secrets_dir_for(cluster, inventory))
    click.echo("\n".join(  # one write, not one a file
        f"wrote {bundle.directory / item.path}{' (0600, holds a secret)' if item.secret else ''}"
        for item in bundle.files
    ))
    _allow_quick_exit()


@main.command()
@inventory_argument
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The bundle directory (new, empty, or an earlier bundle, which is replaced).")
@click.option("--release", type=click.Choice(["bookworm", "trixie"]), default="bookworm", show_default=True,
              help="The hosts' Debian release.")
@click.option("--no-wheels", is_flag=True, help="Leave out the training environment's wheels (several GB with torch).")
@click.option("--nvml-plugin-deb", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="A slurm-wlm-nvml-plugin .deb built before, instead of building it here.")
@click.option("--infiniband", is_flag=True, help="Add the RDMA packages of roles/nccl (nccl_infiniband).")
@click.option("--control-node", is_flag=True,
              help="Add wheels of cluster-cli and ansible-core for a control node with no network (gpu-proof.sh).")
@click.option("--packages", help="Comma-separated Debian packages instead of the cluster's (a small test bundle).")
def bundle(inventory: Path, output: Path, release: str, no_wheels: bool, nvml_plugin_deb: Path | None,
           infiniband: bool, control_node: bool, packages: str | None) -> None:
    """Pack what an air-gapped install needs: an apt repository (with the NVML plugin when a group
    uses autodetect: nvml), wheels, the rendered files (no secrets) and bundle.json."""
    from cluster_cli.bundle.make import BundleOptions, make_bundle
    from cluster_cli.loader import load_cluster
    cluster = load_cluster(inventory)
    options = BundleOptions(
        release=release, wheels=not no_wheels, nvml_plugin_deb=nvml_plugin_deb, infiniband=infiniband,
        control_node=control_node,
        packages=[name for name in packages.split(",") if name] if packages else None,
    )
    made = make_bundle(cluster, output, options)
    click.echo(made.summary)
    click.echo("copy it to every host and set package_mirror (docs/gpu-validation.md).")


rotate_option = click.option(
    "--rotate-secrets", is_flag=True,
    help="Make a new munge key and database password (the old kept 0600 beside them) and take them to "
         "every host in one pass; refused with --limit or --tags (plan: show what it would do).",
)

build_dir_option = click.option(
    "--build-dir", type=click.Path(file_okay=False, path_type=Path),
    help="Where rendered files go (default ~/.local/state/cluster-cli/CLUSTER/build).",
)


def _playbook_options(function):
    options = [
        click.option("--check", is_flag=True, help="Print the plan and change nothing (with --full: Ansible's check mode)."),
        click.option("--diff", is_flag=True, help="Show file differences (secrets are never shown)."),
        click.option("--limit", help="Only these hosts (Ansible --limit pattern)."),
        click.option("--tags", help="Only these tags (preflight, install, configure, run, or a role name)."),
        click.option("-v", "--verbose", count=True, help="More output; repeat for Ansible's -vv.."),
        build_dir_option,
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _run_playbook(
    inventory: Path, playbook: str, title: str, build_dir: Path | None, options: PlaybookOptions,
    verbose: int, extra_vars: dict[str, object] | None = None,
) -> PlaybookResult:
    from cluster_cli import deploy as deploy_steps
    from cluster_cli.loader import load_cluster
    from rich.console import Console
    cluster = load_cluster(inventory)
    console = Console(highlight=False)
    prepared = deploy_steps.prepare(cluster, inventory, build_dir)
    _print_header(console, title, prepared)
    return _run_prepared(console, prepared, playbook, title, options, verbose, extra_vars)


def _print_header(console: Console, title: str, prepared: deploy_steps.Prepared) -> None:
    cluster = prepared.cluster
    console.print(f"{title} cluster '{cluster.name}' ({len(cluster.hosts)} hosts, {len(cluster.nodes)} nodes)")
    console.print(f"rendered configuration: {prepared.bundle.directory}")


def _run_prepared(
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
    _print_failures(console, prepared, result, log_role)
    if closing is not None:
        closing(result)
    console.print(f"full log: {result.log_path}")
    if not result.ok:
        raise ClusterCliError(f"{title.lower()} failed (ansible-playbook exit {result.returncode})")
    return result


def _print_failures(
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


@main.command()
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
        _print_plan(Console(highlight=False), found, show_diff, cluster if rotate_secrets else None, dry_run=True)
    raise SystemExit(_plan_exit(found, rotate_secrets))


def _plan_exit(found: Plan, rotating: bool) -> int:
    """The plan's exit code; a rotation of the secrets is a change pending (3) of its own."""
    return ExitCode.CHANGES if rotating and found.exit_code == ExitCode.OK else found.exit_code


@main.command()
@inventory_argument
@_playbook_options
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
    from cluster_cli.ansible.runner import PlaybookOptions
    from cluster_cli.loader import load_cluster
    from cluster_cli.plan import Impact
    from cluster_cli.progress import print_plan
    from rich.console import Console
    if rotate_secrets:
        rotation.check_scope(limit, tags)
    cluster = load_cluster(inventory)
    console = Console(highlight=False)
    prepared = deploy_steps.prepare(cluster, inventory, build_dir)
    _print_header(console, "Deploy", prepared)
    found, files = deploy_steps.current_plan(prepared, rotating=rotate_secrets)
    if check and not full:
        _print_plan(console, found, diff, cluster if rotate_secrets else None, dry_run=True)
        raise SystemExit(_plan_exit(found, rotate_secrets))
    if found.conflicts or found.unreachable:
        print_plan(console, found, False)
        raise ClusterCliError("nothing was changed: " + "; ".join(found.conflicts + list(found.unreachable)))
    recovered = [] if check else deploy_steps.recover_record(prepared, files, found)
    if recovered:
        console.print(f"the deploy record did not know {', '.join(recovered)}; they hold this cluster's files and "
                      "secrets: recorded from what they hold", markup=False, soft_wrap=True)
    if not found.changes and not full and not rotate_secrets:
        console.print("0 changes: every host matches the inventory; no playbook run (--full runs it anyway)")
        return
    rotate = rotate_secrets and not check
    _print_plan(console, found, diff, cluster if rotate_secrets else None, dry_run=not rotate)
    removed = [change.subject for change in found.by_impact(Impact.NODE_REMOVE)]
    if removed and not check:
        requeued = deploy_steps.retire_nodes(cluster, removed, wait_s, force)
        console.print(f"drained {', '.join(removed)}" + (f"; requeued jobs {', '.join(requeued)}" if requeued else ""))
    if rotate:
        prepared, files = _rotate(console, prepared, inventory, build_dir)
    scope = None if full or limit or rotate else ",".join(found.hosts_to_apply())
    options = PlaybookOptions(check=check, diff=diff, limit=deploy_steps.limit_with_control_node(limit or scope, cluster),
                              tags=tags, verbosity=max(verbose - 1, 0))
    retired = deploy_steps.write_retired_inventory(prepared)
    if retired and scope is not None:
        console.print(f"stopping slurmd on the hosts that left the inventory: {', '.join(retired)}")
    rollout = deploy_steps.rollout_vars(cluster, *deploy_steps.rollout_settings(cluster, batch, max_fail))
    _print_rollout(console, rollout)
    extra_vars = {**rollout, **(rotation.ROLE_VARIABLES if rotate else {})}
    planned = None if check or limit or tags else list(cluster.hosts) if scope is None else found.hosts_to_apply()
    closing = partial(_close_deploy, console, prepared, files, planned, retired)
    try:
        _run_prepared(console, prepared, "site.yml", "Deploy", options, verbose, extra_vars, closing=closing)
    except (ClusterCliError, KeyboardInterrupt):
        if rotate:
            console.print(rotation.unfinished_note(prepared.bundle.rotated), markup=False, soft_wrap=True)
        raise


def _print_rollout(console: Console, rollout: dict[str, int]) -> None:
    threshold = rollout["deploy_max_fail_percentage"]
    if "deploy_slurmd_serial" not in rollout:
        if threshold < 100:
            console.print(f"compute hosts: all at once; the rollout stops when more than {threshold}% of them failed")
        return
    console.print(f"slurmd restarts: {rollout['slurmd_restart_batch']} per host at a time, "
                  f"{rollout['deploy_slurmd_serial']} compute host(s) per wave; the rollout stops when more "
                  f"than {threshold}% of a wave failed, or all of its hosts")


def _close_deploy(
    console: Console, prepared: deploy_steps.Prepared, files: dict[str, list[HostFile]], planned: list[str] | None,
    retired: list[str], result: PlaybookResult,
) -> None:
    """The rollout's counts; the record of what was deployed gets the planned hosts that were (with
    --check, --limit or --tags, ``planned`` is None: nothing is recorded)."""
    from cluster_cli import deploy as deploy_steps
    from cluster_cli.rollout import count_lines
    found = deploy_steps.rollout_outcome(prepared, result, retired)
    for line in count_lines(found):
        console.print(line, markup=False)
    if planned is not None and found.finished:
        deployed = set(found.deployed)
        deploy_steps.record_deployed(prepared, files, [host for host in planned if host in deployed],
                                     keep=found.failed_hosts)


def _print_plan(
    console: Console, found: Plan, diff: bool, rotating: Cluster | None, dry_run: bool,
) -> None:
    """The plan, and what a rotation of the secrets adds to it (``rotating``: its cluster)."""
    from cluster_cli import rotation
    from cluster_cli.progress import print_plan
    print_plan(console, found, diff)
    for line in rotation.plan_lines(rotating, dry_run) if rotating else []:
        console.print(line, markup=False, soft_wrap=True)


def _rotate(
    console: Console, prepared: deploy_steps.Prepared, inventory: Path, build_dir: Path | None,
) -> tuple[deploy_steps.Prepared, dict[str, list[HostFile]]]:
    """New secrets (the old kept beside them), the build rendered again with them, and the files
    each host should then hold."""
    from cluster_cli import deploy as deploy_steps, rotation
    rotated = deploy_steps.prepare(prepared.cluster, inventory, build_dir, rotation.new_stamp())
    console.print(rotation.kept_line(rotated.bundle.rotated), markup=False, soft_wrap=True)
    return rotated, deploy_steps.expected_files(rotated)


def _require_owned(cluster: Cluster, inventory: Path, hosts: list[str] | None = None) -> None:
    """Refuse (exit 1) before a verb changes a host or Slurm's state that is another cluster's."""
    from cluster_cli.build import secrets_dir_for
    from cluster_cli.ownership import require_owned
    require_owned(cluster, secrets_dir_for(cluster, inventory), hosts)


@main.command()
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
    _require_owned(cluster, inventory)
    if purge:
        require_confirmation(cluster, yes_name, "delete its state and accounting database")
        if cluster.inventory.accounting.enabled:
            dump, _ = upgrade_steps.backup_files(cluster, backup_dir)
            extra_vars["slurmdbd_teardown_dump_file"] = dump
            click.echo(f"the accounting database is dumped to {dump} (0600) on {cluster.inventory.accounting.host} "
                       "before it is dropped")
    options = PlaybookOptions(limit=limit, verbosity=max(verbose - 1, 0))
    _run_playbook(inventory, "teardown.yml", "Teardown", None, options, verbose, extra_vars)


@main.command()
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
    _print_header(console, "Upgrade", prepared)
    probes = probe_cluster(cluster, {}, owner_requests(cluster, expected_secrets(
        prepared.bundle.secrets.munge_key_path.read_bytes(), prepared.bundle.secrets.db_password())))
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
        _run_prepared(console, prepared, "upgrade.yml", "Upgrade preflight", PlaybookOptions(
            tags="preflight", verbosity=verbosity), verbose, run.extra_vars(), upgrade_steps.failure_daemon)
    except ClusterCliError:
        raise upgrade_steps.UpgradeRefused("the hosts' preflight refused the upgrade (above): nothing was upgraded") from None
    _run_prepared(console, prepared, "upgrade.yml", "Upgrade", PlaybookOptions(
        skip_tags="preflight", verbosity=verbosity), verbose, run.extra_vars(), upgrade_steps.failure_daemon)


@main.command()
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


@main.command()
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
        _require_owned(cluster, inventory, controller_hosts(cluster))
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


@main.command()
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
@click.option("--timeout", "timeout_s", type=float, default=180.0, show_default=True, help="Seconds any one check may take.")
@click.option("--list", "list_checks", is_flag=True, help="List the checks and exit.")
@click.option(
    "--submit-host",
    "submit_host_name",
    help="Inventory host to submit the jobs from (default: the first login host, else the primary controller).",
)
def smoke(
    inventory: Path | None, only: str | None, partition: str | None, sample: int, all_nodes: bool,
    json_path: Path | None, junit_path: Path | None, timeout_s: float, list_checks: bool,
    submit_host_name: str | None,
) -> None:
    """Run the post-install smoke jobs as an unprivileged user; exit 0 only if none failed.

    Jobs are submitted from the submit host: here when its connection is local, otherwise over
    SSH (the suite is copied there for the run and removed afterwards).
    """
    from cluster_cli.loader import load_cluster
    from cluster_cli.progress import SmokeProgress
    from cluster_cli.smoke import CHECKS, format_table, run_smoke, write_json, write_junit
    from cluster_cli.smoke.registry import select as select_checks
    from cluster_cli.smoke_control.remote import run_remote_smoke, submit_host
    from cluster_cli.smoke_control.target import smoke_plan
    from rich.console import Console
    if list_checks:
        for check in CHECKS:
            by_name = "" if check.default else " (asked for by name)"
            click.echo(f"{check.name:18} {check.scope:10} {check.summary}{by_name}")
        return
    if inventory is None:
        raise click.UsageError("Missing argument 'INVENTORY' (only --list runs without one).")
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
    counts = report.counts
    console.print(
        f"smoke: {counts.get('pass', 0)} passed, {counts.get('fail', 0)} failed, {counts.get('skip', 0)} skipped "
        f"in {report.duration_s:.0f} s (run directory {report.run_dir})"
    )
    if not report.ok:
        raise SystemExit(ExitCode.FAILURE)


@main.group()
def nodes() -> None:
    """List, drain and resume the nodes of a running cluster."""


@nodes.command("list")
@inventory_argument
@click.option("--json", "as_json", is_flag=True, help="Print the nodes as JSON.")
def nodes_list(inventory: Path, as_json: bool) -> None:
    """Each node's state, drain reason, who set it and when (as slurmctld reports them)."""
    import json
    from cluster_cli import nodes as node_steps
    from cluster_cli.loader import load_cluster
    from dataclasses import asdict
    found = node_steps.list_nodes(load_cluster(inventory))
    if as_json:
        click.echo(json.dumps([asdict(node) for node in found], indent=2, sort_keys=True))
        return
    for node in found:
        by = f"  (set by {node.set_by} {node.since})" if node.reason else ""
        click.echo(f"{node.name:16} {node.state:12} {node.reason}{by}".rstrip())


@nodes.command("drain")
@inventory_argument
@click.argument("names")
@click.option("--reason", required=True, help="Why (stored as 'cluster-cli: REASON').")
def nodes_drain(inventory: Path, names: str, reason: str) -> None:
    """Drain NAMES (a hostlist, e.g. gpu[001-004]): running jobs finish, no new ones start."""
    from cluster_cli import nodes as node_steps
    from cluster_cli.loader import load_cluster
    from cluster_cli.probe import controller_hosts
    cluster = load_cluster(inventory)
    selected = node_steps.select(cluster, names)
    _require_owned(cluster, inventory, controller_hosts(cluster))
    stored = node_steps.drain(cluster, selected, reason)
    click.echo(f"drained {', '.join(selected)}: {stored}")


@nodes.command("resume")
@inventory_argument
@click.argument("names")
@click.option("--force", is_flag=True, help="Also lift drains that cluster-cli did not set.")
def nodes_resume(inventory: Path, names: str, force: bool) -> None:
    """Resume NAMES; a drain someone else set is refused without --force (exit 2)."""
    from cluster_cli import nodes as node_steps
    from cluster_cli.loader import load_cluster
    from cluster_cli.probe import controller_hosts
    cluster = load_cluster(inventory)
    selected = node_steps.select(cluster, names)
    _require_owned(cluster, inventory, controller_hosts(cluster))
    resumed = node_steps.resume(cluster, selected, force)
    click.echo(f"resumed {', '.join(resumed)}" if resumed else "nothing to resume")


@main.command()
def schema() -> None:
    """Print the inventory's JSON Schema (for editors and CI linting)."""
    import json
    from cluster_cli.model import Inventory
    document = Inventory.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "cluster-cli inventory"
    click.echo(json.dumps(document, indent=2, sort_keys=True))


if __name__ == "__main__":  # pragma: no cover
    program()
