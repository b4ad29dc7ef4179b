"""The build directory: every rendered file a deploy needs, written all at once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cluster_cli.cluster import Cluster
from cluster_cli.errors import ClusterCliError
from cluster_cli.render import RenderedFile, render_configs, write_files
from cluster_cli.render.ansible_inventory import render_ansible_inventory
from cluster_cli.render.slurmdbd_conf import InvalidSecret
from cluster_cli.paths import default_secrets_dir
from cluster_cli.secrets_store import ClusterSecrets, ensure_secrets


@dataclass(frozen=True)
class Bundle:
    directory: Path
    files: list[RenderedFile]
    secrets: ClusterSecrets


def secrets_dir_for(cluster: Cluster, inventory_path: Path) -> Path:
    """The inventory's secrets.dir (relative to the inventory file), or the default."""
    configured = cluster.inventory.secrets.dir
    if configured is None:
        return default_secrets_dir(cluster.name)
    path = Path(configured).expanduser()
    return path if path.is_absolute() else (inventory_path.parent / path).resolve()


def build_bundle(cluster: Cluster, directory: Path, secrets_dir: Path) -> Bundle:
    """Generate missing secrets, render every file and write them into ``directory``."""
    secrets = ensure_secrets(secrets_dir)
    try:
        files = render_configs(cluster, secrets.db_password() if cluster.inventory.accounting.enabled else None)
    except InvalidSecret as error:
        raise ClusterCliError(f"{secrets.db_password_path}: {error}") from None
    files.append(RenderedFile("ansible/inventory.yml", render_ansible_inventory(cluster)))
    try:
        write_files(directory, files)
    except OSError as error:
        raise ClusterCliError(f"cannot write {directory}: {error.strerror}") from None
    return Bundle(directory.resolve(), files, secrets)
