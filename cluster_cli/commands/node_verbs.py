"""`cluster-cli nodes list|drain|resume`: the node lifecycle verbs (node_lifecycle.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from cluster_cli.commands.shared import inventory_argument, require_owned

if TYPE_CHECKING:
    from cluster_cli.cluster import Cluster


@click.group()
def nodes() -> None:
    """List, drain and resume the nodes of a running cluster."""


@nodes.command("list")
@inventory_argument
@click.option("--json", "as_json", is_flag=True, help="Print the nodes as JSON.")
def nodes_list(inventory: Path, as_json: bool) -> None:
    """Each node's state, drain reason, who set it and when (as slurmctld reports them)."""
    import json
    from cluster_cli import node_lifecycle as node_steps
    from cluster_cli.loader import load_cluster
    from dataclasses import asdict
    found = node_steps.list_nodes(load_cluster(inventory))
    if as_json:
        click.echo(json.dumps([asdict(node) for node in found], indent=2, sort_keys=True))
        return
    for node in found:
        by = f"  (set by {node.set_by} {node.since})" if node.reason else ""
        click.echo(f"{node.name:16} {node.state:12} {node.reason}{by}".rstrip())


def _owned_selection(inventory: Path, names: str) -> tuple[Cluster, list[str]]:
    """The cluster and the nodes NAMES selects, once its controllers are shown to be this
    cluster's (the drain or resume changes their state)."""
    from cluster_cli import node_lifecycle as node_steps
    from cluster_cli.loader import load_cluster
    from cluster_cli.probe import controller_hosts
    cluster = load_cluster(inventory)
    selected = node_steps.select(cluster, names)
    require_owned(cluster, inventory, controller_hosts(cluster))
    return cluster, selected


@nodes.command("drain")
@inventory_argument
@click.argument("names")
@click.option("--reason", required=True, help="Why (stored as 'cluster-cli: REASON').")
def nodes_drain(inventory: Path, names: str, reason: str) -> None:
    """Drain NAMES (a hostlist, e.g. gpu[001-004]): running jobs finish, no new ones start."""
    from cluster_cli import node_lifecycle as node_steps
    cluster, selected = _owned_selection(inventory, names)
    stored = node_steps.drain(cluster, selected, reason)
    click.echo(f"drained {', '.join(selected)}: {stored}")


@nodes.command("resume")
@inventory_argument
@click.argument("names")
@click.option("--force", is_flag=True, help="Also lift drains that cluster-cli did not set.")
def nodes_resume(inventory: Path, names: str, force: bool) -> None:
    """Resume NAMES; a drain someone else set is refused without --force (exit 2)."""
    from cluster_cli import node_lifecycle as node_steps
    cluster, selected = _owned_selection(inventory, names)
    resumed = node_steps.resume(cluster, selected, force)
    click.echo(f"resumed {', '.join(resumed)}" if resumed else "nothing to resume")
