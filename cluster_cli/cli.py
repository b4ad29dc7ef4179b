"""The `cluster-cli` command: lifecycle verbs over one inventory file.

The verbs are in ``cluster_cli.commands``, one module per group of verbs; this module dispatches to
them. Exit codes (errors.ExitCode): 0 success, 1 the operation failed, 2 bad usage or an invalid
inventory. Errors become messages and exit codes in one place, ``ClusterCliGroup.invoke``.
"""

from __future__ import annotations

import os
import sys

import click

from cluster_cli import __version__
from cluster_cli.commands import (
    deploy_verbs, gpu_kit_verb, inventory_verbs, maintenance_verbs, node_verbs, smoke_verb, status_verbs,
)
from cluster_cli.commands.shared import QuickExit
from cluster_cli.errors import ClusterCliError, ExitCode

# Each verb imports what it needs when it runs (pydantic, YAML, rich, the deploy machinery): `--version`,
# `--help` and `render` start without the rest (tests/unit/test_cli_imports.py keeps it so).


def _smoke_exit_code(error: Exception) -> ExitCode | None:
    """The smoke package is stdlib-only (it runs on submit hosts), so its errors are not
    ClusterCliErrors; their exit codes are set here (none before the package was imported)."""
    errors = sys.modules.get("cluster_cli.smoke.suite_errors")
    if errors is None:
        return None
    codes: dict[type[Exception], ExitCode] = {
        errors.UnknownCheckError: ExitCode.INVALID,
        errors.SmokeSetupError: ExitCode.FAILURE,
    }
    return next((code for kind, code in codes.items() if isinstance(error, kind)), None)


def _flushed() -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the ordinary exit reports it as before
        return False
    return True


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


for verb in (
    inventory_verbs.validate, inventory_verbs.render, inventory_verbs.bundle, gpu_kit_verb.gpu_kit, inventory_verbs.schema,
    deploy_verbs.plan, deploy_verbs.deploy, maintenance_verbs.teardown, maintenance_verbs.upgrade,
    status_verbs.status, status_verbs.health, smoke_verb.smoke, node_verbs.nodes,
):
    main.add_command(verb)


def program() -> None:
    """The `cluster-cli` program (console script, `python -m cluster_cli`): `main`, and after a verb
    that allowed it (`validate`, `render`) and succeeded, os._exit: the interpreter's teardown would
    free a 10,000-node cluster's heap object by object (20-25 ms CPU of a 0.4 s `render`) to no end.
    In-process callers (tests, click's CliRunner) call `main`, which never exits this way."""
    QuickExit.allowed = False
    try:
        main()
    except SystemExit as stop:
        if QuickExit.allowed and stop.code in (0, None) and _flushed():
            os._exit(0)
        raise


if __name__ == "__main__":  # pragma: no cover
    program()
