"""The inventory's shared file systems (``storage.mounts``) as the hosts see them: what each type
needs (its client packages, its default options, the form of its source) and which hosts mount
which mount. resolve/storage checks the inventory against these facts, render/mount_units writes
the units, roles/storage_client applies them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from cluster_cli.model import MOUNT_SELECTORS, Inventory, Mount
from cluster_cli.resolve.hosts import ManagedHost

# The Debian packages that hold each type's mount helper. A type missing here has no client this
# release can install: its mounts are refused unless the site says `client_installed: true`.
CLIENT_PACKAGES: dict[str, tuple[str, ...]] = {
    "nfs": ("nfs-common",),
    "nfs4": ("nfs-common",),
    "fuse.sshfs": ("sshfs",),
    "cephfs": ("ceph-common",),
    "glusterfs": ("glusterfs-client",),
    # in the kernel: nothing to install
    "tmpfs": (),
    "ext4": (),
    "xfs": (),
    "btrfs": (),
}
NETWORK_TYPES = frozenset({"nfs", "nfs4", "fuse.sshfs", "cephfs", "glusterfs", "lustre", "beegfs"})
# Where a host that cannot reach the server still boots (nofail) and the mount waits for the
# network (_netdev: systemd orders it after network-online.target, mount -a at boot skips it).
NETWORK_DEFAULTS = ("_netdev", "nofail")
DEFAULT_OPTIONS: dict[str, tuple[str, ...]] = {
    # hard: a server that stops answering makes I/O wait, not fail with EIO halfway through a
    # checkpoint (nfs(5) warns that soft can corrupt data). No vers=: the client negotiates the
    # highest version both sides speak (4.2 first), so a v3-only server still mounts.
    "nfs": (*NETWORK_DEFAULTS, "hard"),
    "nfs4": (*NETWORK_DEFAULTS, "hard"),
    # allow_other: every user sees the files, not only root who mounted them; default_permissions:
    # the kernel checks each user's access by the files' modes (without it, sshfs lets every user
    # do what the SSH login may). reconnect and the keep-alives ride out a dropped connection.
    # dir_cache=no: sshfs otherwise keeps a listed directory's attributes for 20 s, and a file another
    # node rewrote in that time is read cut to its old size (seen on the test bed: "b2-" for "b2-much-longer").
    "fuse.sshfs": (*NETWORK_DEFAULTS, "allow_other", "default_permissions", "reconnect",
                   "ServerAliveInterval=15", "ServerAliveCountMax=3", "dir_cache=no"),
}
# The units' [Install] target: a network file system is wanted by remote-fs.target.
REMOTE_FS_TARGET = "remote-fs.target"
LOCAL_FS_TARGET = "local-fs.target"
NFS_SOURCE = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):/\S*")
SSHFS_SOURCE = re.compile(r"([A-Za-z0-9_.-]+@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):\S*")
# the inventory's selectors -> the roles of cluster_cli.resolve.hosts
ROLE_OF_SELECTOR = dict(zip(MOUNT_SELECTORS, ("controller", "database", "login", "compute", "monitoring"), strict=True))


def mount_group(index: int) -> str:
    """The Ansible group of the hosts that mount storage.mounts[index] (render/ansible_inventory)."""
    return f"storage_mount_{index}"


def client_packages(mount: Mount) -> tuple[str, ...]:
    """The packages a host needs to mount ``mount`` (none where the site installs the client)."""
    return () if mount.client_installed else CLIENT_PACKAGES.get(mount.type, ())


def installable(mount: Mount) -> bool:
    return mount.client_installed or mount.type in CLIENT_PACKAGES


def mount_options(mount: Mount) -> list[str]:
    """The inventory's options, or the type's defaults where it gives none."""
    if mount.options is not None:
        return list(mount.options)
    return list(DEFAULT_OPTIONS.get(mount.type, NETWORK_DEFAULTS if mount.type in NETWORK_TYPES else ("nofail",)))


def install_target(options: Iterable[str]) -> str:
    return REMOTE_FS_TARGET if "_netdev" in options else LOCAL_FS_TARGET


def source_problem(mount: Mount) -> str | None:
    """Why ``mount.source`` cannot be what its type mounts; None where it can."""
    if mount.type in ("nfs", "nfs4") and not NFS_SOURCE.fullmatch(mount.source):
        return f"{mount.source!r} is not an NFS export: SERVER:/PATH (e.g. nfs1:/export/home)"
    if mount.type == "fuse.sshfs" and not SSHFS_SOURCE.fullmatch(mount.source):
        return f"{mount.source!r} is not an sshfs source: [USER@]HOST:[PATH]"
    return None


def selected_hosts(hosts: dict[str, ManagedHost], mount: Mount) -> list[str]:
    """The hosts that mount ``mount``, in the cluster's host order (every host without `hosts`)."""
    if mount.hosts is None:
        return list(hosts)
    roles = {ROLE_OF_SELECTOR[name] for name in mount.hosts if name in ROLE_OF_SELECTOR}
    groups = set(mount.hosts) - set(ROLE_OF_SELECTOR)
    return [name for name, host in hosts.items() if host.roles & roles or _in_groups(host, groups)]


def _in_groups(host: ManagedHost, groups: set[str]) -> bool:
    return bool(groups) and any(node.group.name in groups for node in host.slurmd_nodes)


def mounts_by_host(inventory: Inventory, hosts: dict[str, ManagedHost]) -> dict[str, list[int]]:
    """Each host's mounts, as indexes into storage.mounts (every host, with none where it mounts nothing)."""
    by_host: dict[str, list[int]] = {name: [] for name in hosts}
    storage = inventory.storage
    for index, mount in enumerate(storage.mounts if storage is not None else []):
        for name in selected_hosts(hosts, mount):
            by_host[name].append(index)
    return by_host


def packages_by_host(inventory: Inventory, hosts: dict[str, ManagedHost]) -> dict[str, list[str]]:
    """The client packages each host's mounts need (roles/storage_client installs them)."""
    storage = inventory.storage
    if storage is None:
        return {name: [] for name in hosts}
    return {name: sorted({package for index in indexes for package in client_packages(storage.mounts[index])})
            for name, indexes in mounts_by_host(inventory, hosts).items()}


def all_client_packages(inventory: Inventory) -> list[str]:
    """Every client package of the inventory's mounts (probed on every host, packed by `bundle`)."""
    storage = inventory.storage
    return sorted({package for mount in (storage.mounts if storage else []) for package in client_packages(mount)})
