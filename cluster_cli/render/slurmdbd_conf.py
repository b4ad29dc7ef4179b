"""slurmdbd.conf: only for the database host, 0600, the one file that holds the DB password."""

from __future__ import annotations

from cluster_cli.cluster import Cluster
from cluster_cli.render.common import header, key_value_lines
from cluster_cli.render.slurm_conf import global_settings
from cluster_cli.slurm_keys import find_key, list_items

# The PrivateData items slurmdbd knows (slurmdbd.conf(5)); slurm.conf's others (nodes, partitions,
# cloud) are slurmctld's alone.
SLURMDBD_PRIVATE_DATA = ("accounts", "events", "jobs", "reservations", "usage", "users")


def private_data(cluster: Cluster) -> str | None:
    """slurmdbd's PrivateData: the items of slurm.conf's that slurmdbd knows, so that sacct and
    sreport hide what squeue and sshare hide."""
    settings = global_settings(cluster)
    key = find_key(settings, "PrivateData")
    items = [item for item in list_items(settings[key] if key else None)
             if item.lower() in SLURMDBD_PRIVATE_DATA]
    return ",".join(items) or None


class InvalidSecret(ValueError):
    """A secret slurmdbd.conf cannot carry."""


def render_slurmdbd_conf(cluster: Cluster, storage_password: str) -> str | None:
    inventory = cluster.inventory
    accounting = inventory.accounting
    if not accounting.enabled or accounting.host is None:
        return None
    # slurmdbd.conf has no quoting: '#' starts a comment and white space ends the value.
    if not storage_password or any(char in storage_password for char in "# \t\n\"'"):
        raise InvalidSecret("the database password is empty or contains '#', quotes or white space")
    paths = inventory.slurm.paths
    settings = {
        "AuthType": "auth/munge",
        "DbdHost": accounting.host,
        "DbdPort": accounting.port,
        "LogFile": f"{paths.log_dir}/slurmdbd.log",
        "PidFile": f"{paths.run_dir}/slurmdbd.pid",
        "SlurmUser": inventory.slurm.user,
        "StorageHost": "localhost",
        "StorageLoc": accounting.database,
        "StoragePass": storage_password,
        "StoragePort": 3306,
        "StorageType": "accounting_storage/mysql",
        "StorageUser": accounting.database_user,
    }
    hidden = private_data(cluster)
    if hidden:
        settings["PrivateData"] = hidden
    lines = [header(cluster.name, "slurmdbd.conf").rstrip("\n")] + key_value_lines(settings)
    return "\n".join(lines) + "\n"
