"""What the verb modules share: the inventory argument and the options several verbs take, the
quick exit a verb may allow (cli.program), and the ownership check of the verbs that change hosts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from cluster_cli.cluster import Cluster


class QuickExit:
    """Whether the verb that ran may end the process with os._exit (see `cli.program`)."""

    allowed = False


def allow_quick_exit() -> None:
    """Called last by a verb that leaves nothing behind but its output and its closed files."""
    QuickExit.allowed = True


inventory_argument = click.argument("inventory", type=click.Path(dir_okay=False, path_type=Path))

rotate_option = click.option(
    "--rotate-secrets", is_flag=True,
    help="Make a new munge key and database password (the old kept 0600 beside them) and take them to "
         "every host in one pass; refused with --limit or --tags (plan: show what it would do).",
)

build_dir_option = click.option(
    "--build-dir", type=click.Path(file_okay=False, path_type=Path),
    help="Where rendered files go (default ~/.local/state/cluster-cli/CLUSTER/build).",
)


def playbook_options(function: Callable[..., Any]) -> Callable[..., Any]:
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


def require_owned(cluster: Cluster, inventory: Path, hosts: list[str] | None = None) -> None:
    """Refuse (exit 1) before a verb changes a host or Slurm's state that is another cluster's."""
    from cluster_cli.build import secrets_dir_for
    from cluster_cli.ownership import require_owned as refuse_unless_owned
    refuse_unless_owned(cluster, secrets_dir_for(cluster, inventory), hosts)
