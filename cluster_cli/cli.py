"""The `cluster-cli` command: lifecycle verbs over one inventory file.

Exit codes: 0 success, 1 the operation failed, 2 bad usage or an invalid inventory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from cluster_cli import __version__
from cluster_cli.build import build_bundle, secrets_dir_for
from cluster_cli.cluster import Cluster, load_cluster
from cluster_cli.errors import ClusterCliError, InventoryError
from cluster_cli.model import Inventory
from cluster_cli.paths import default_build_dir

EXIT_FAILURE = 1
EXIT_INVALID = 2

inventory_argument = click.argument("inventory", type=click.Path(dir_okay=False, path_type=Path))


def _load(inventory: Path) -> Cluster:
    try:
        return load_cluster(inventory)
    except InventoryError as error:
        count = len(error.problems)
        click.echo(str(error), err=True)
        click.echo(f"{inventory}: {count} problem{'s' if count != 1 else ''}; nothing was changed.", err=True)
        raise SystemExit(EXIT_INVALID) from None


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(EXIT_FAILURE)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cluster-cli")
def main() -> None:
    """Provision a Slurm GPU cluster and its training stack from one inventory file."""


@main.command()
@inventory_argument
@click.option("-q", "--quiet", is_flag=True, help="Print nothing on success.")
def validate(inventory: Path, quiet: bool) -> None:
    """Check an inventory; report every problem as file:line: field: message."""
    cluster = _load(inventory)
    if not quiet:
        groups = len(cluster.inventory.node_groups)
        gpus = sum(node.group.gpus.count for node in cluster.nodes if node.group.gpus)
        click.echo(
            f"{inventory}: cluster '{cluster.name}' is valid: {len(cluster.nodes)} nodes in {groups} "
            f"group{'s' if groups != 1 else ''}, {gpus} GPUs, {len(cluster.partition_nodes)} partition"
            f"{'s' if len(cluster.partition_nodes) != 1 else ''}, {len(cluster.hosts)} managed host"
            f"{'s' if len(cluster.hosts) != 1 else ''}."
        )


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
    cluster = _load(inventory)
    target = output or default_build_dir(cluster.name)
    try:
        bundle = build_bundle(cluster, target, secrets_dir_for(cluster, inventory))
    except ClusterCliError as error:
        _fail(str(error))
    for item in bundle.files:
        note = " (0600, holds a secret)" if item.secret else ""
        click.echo(f"wrote {bundle.directory / item.path}{note}")


@main.command()
def schema() -> None:
    """Print the inventory's JSON Schema (for editors and CI linting)."""
    document = Inventory.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "cluster-cli inventory"
    click.echo(json.dumps(document, indent=2, sort_keys=True))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
