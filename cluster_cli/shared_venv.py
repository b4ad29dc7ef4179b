"""Where the training environment (``training.venv_path``) lives: on a shared mount that several of
its hosts see, or on each host's own disk.

On a shared mount it is installed once: roles/training_env lets only the first of those hosts in a
deploy's play create it and pip into it (the control node runs that one task on that one host, so
no two clients write it at once: network file systems do not all honour locks between clients),
and the play after it checks the others against the pins. On local disks every host installs its own.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from cluster_cli.cluster import Cluster
from cluster_cli.model import Inventory, Mount
from cluster_cli.shared_storage import LOCAL_TYPES, selected_hosts, serves_in_place

# The hosts roles/training_env runs on (render/ansible_inventory's training_env group).
TRAINING_ROLES = frozenset({"compute", "login"})


def venv_mount(inventory: Inventory) -> Mount | None:
    """The shared mount ``training.venv_path`` lies on (at or below its mount point); None on local disks."""
    venv = PurePosixPath(inventory.training.venv_path)
    for mount in inventory.storage.mounts if inventory.storage is not None else []:
        point = PurePosixPath(mount.path)
        if mount.type not in LOCAL_TYPES and (venv == point or point in venv.parents):
            return mount  # mounts never nest (resolve/storage): there is at most one
    return None


def sharing_hosts(cluster: Cluster) -> list[str]:
    """The training environment's hosts that see it on one shared mount (the NFS server of its own
    export among them), in host order; [] where it is on local disks or only one host sees it."""
    mount = venv_mount(cluster.inventory)
    return [] if mount is None else _sharing(cluster, mount)


def _sharing(cluster: Cluster, mount: Mount) -> list[str]:
    mounting = set(selected_hosts(cluster.hosts, mount))
    # the NFS server of its own export sees the clients' files at that path without mounting it
    sharing = [name for name, host in cluster.hosts.items()
               if host.roles & TRAINING_ROLES and (name in mounting or serves_in_place(host, mount))]
    return sharing if len(sharing) > 1 else []


def shared_venv_notes(cluster: Cluster) -> list[str]:
    """What plan says of an environment on shared storage (nothing for one on local disks)."""
    mount = venv_mount(cluster.inventory)
    sharing = [] if mount is None else _sharing(cluster, mount)
    if not sharing or mount is None:
        return []
    return [
        f"training environment {cluster.inventory.training.venv_path} is on shared storage ({mount.source} at "
        f"{mount.path}): a deploy installs it once, from the first of {', '.join(sharing)} it runs on, and the "
        "others only check it"
    ]
