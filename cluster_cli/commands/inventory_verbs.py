"""The verbs that read the inventory and touch no host: `validate`, `render`, `bundle`, `schema`."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from cluster_cli.commands.shared import allow_quick_exit, inventory_argument
from cluster_cli.pydantic_plugins import skip_plugin_lookup


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


@click.command()
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
    allow_quick_exit()


@click.command()
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
        from cluster_cli.build import write_build, secrets_dir_for
        from cluster_cli.loader import load_cluster
        from cluster_cli.paths import default_build_dir
        cluster = load_cluster(inventory)
        target = output or default_build_dir(cluster.name)
        build = write_build(cluster, target, secrets_dir_for(cluster, inventory))
    click.echo("\n".join(  # one write, not one a file
        f"wrote {build.directory / item.path}{' (0600, holds a secret)' if item.secret else ''}"
        for item in build.files
    ))
    allow_quick_exit()


@click.command()
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


@click.command()
def schema() -> None:
    """Print the inventory's JSON Schema (for editors and CI linting)."""
    import json
    from cluster_cli.model import Inventory
    document = Inventory.model_json_schema()
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "cluster-cli inventory"
    click.echo(json.dumps(document, indent=2, sort_keys=True))
