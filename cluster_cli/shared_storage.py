"""The inventory's shared file systems (``storage.mounts``) as the hosts see them: what each type
needs (its client packages, its default options, the form of its source) and which hosts mount
which mount; and the NFS server (``storage.nfs_server``): its exports, their clients and options,
and the mounts they add. resolve/storage checks the inventory against these facts,
render/mount_units writes the units and render/nfs_exports the exports, roles/storage_client and
roles/nfs_server apply them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from cluster_cli.model import MOUNT_SELECTORS, Inventory, Mount, NfsExport, NfsServer, Storage
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
# Types whose file system lies on the host itself: a mount of one is no more shared than the disk
# (every other type is taken for a shared one: a site's types pass through).
LOCAL_TYPES = frozenset({"tmpfs", "ext4", "xfs", "btrfs"})
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


def shared_mounts(inventory: Inventory) -> list[dict[str, str]]:
    """The shared (not LOCAL_TYPES) mounts as roles/common's people task takes them: {path, hosts_group}."""
    storage = inventory.storage
    return [{"path": mount.path, "hosts_group": mount_group(index)}
            for index, mount in enumerate(storage.mounts if storage is not None else []) if mount.type not in LOCAL_TYPES]


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
    """The hosts that mount ``mount``, in the cluster's host order (every host without `hosts`); never
    the NFS server of the mount itself (a loopback NFS mount can deadlock the server under memory
    pressure, and one at the exported path would hide the export)."""
    server = nfs_server_name(mount)
    if mount.hosts is None:
        return [name for name, host in hosts.items() if not _is(host, server)]
    roles = {ROLE_OF_SELECTOR[name] for name in mount.hosts if name in ROLE_OF_SELECTOR}
    groups = set(mount.hosts) - set(ROLE_OF_SELECTOR)
    return [name for name, host in hosts.items()
            if (host.roles & roles or _in_groups(host, groups)) and not _is(host, server)]


def nfs_server_name(mount: Mount) -> str | None:
    """The server part of an nfs/nfs4 source (brackets of an IPv6 address taken off); None otherwise."""
    if mount.type not in ("nfs", "nfs4") or not NFS_SOURCE.fullmatch(mount.source):
        return None
    return mount.source.rsplit(":/", 1)[0].strip("[]")


def _is(host: ManagedHost, server: str | None) -> bool:
    return server is not None and server in (host.name, host.address)


def serves_in_place(host: ManagedHost, mount: Mount) -> bool:
    """Whether ``host`` is the NFS server of ``mount`` and has its files at the mount point itself (an
    export of the cluster's NFS server mounted at its own path): it sees what its clients see there
    without mounting it."""
    return _is(host, nfs_server_name(mount)) and normal_path(mount.source.rsplit(":", 1)[1]) == normal_path(mount.path)


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
    """The client packages each host's mounts need (roles/storage_client installs them), and the
    server's on the NFS server's host (roles/nfs_server)."""
    storage = inventory.storage
    if storage is None:
        return {name: [] for name in hosts}
    server = storage.nfs_server.host if storage.nfs_server is not None else None
    return {name: sorted({package for index in indexes for package in client_packages(storage.mounts[index])}
                         | set(SERVER_PACKAGES if name == server else ()))
            for name, indexes in mounts_by_host(inventory, hosts).items()}


def all_storage_packages(inventory: Inventory) -> list[str]:
    """Every client package of the inventory's mounts, and the NFS server's where it has one (probed
    on every host, packed by `bundle`)."""
    storage = inventory.storage
    if storage is None:
        return []
    server = SERVER_PACKAGES if storage.nfs_server is not None else ()
    return sorted({package for mount in storage.mounts for package in client_packages(mount)} | set(server))


# storage.nfs_server
SERVER_PACKAGES = ("nfs-kernel-server",)
# The kernel's server listens on NFS's own port; plan and status find the server by rpc.mountd, its
# one process (nfsd's threads are the kernel's, with no command line to match).
SERVER_PORT = 2049
SERVER_PROGRAM = "rpc.mountd"
# root_squash: root on a client is nobody on the export; sync: the server answers a write once it
# is on disk (a checkpoint a job was told is written survives a server crash); no_subtree_check:
# exports(5)'s default since nfs-utils 1.1, said here so that exportfs does not warn.
DEFAULT_EXPORT_OPTIONS = ("rw", "sync", "root_squash", "no_subtree_check")
# Shipped when the server is declared without exports: homes, and a work area (checkpoints, data
# sets, containers) where each user makes a directory of their own (sticky: none removes another's).
DEFAULT_EXPORTS = (NfsExport(path="/home", mode="0755"), NfsExport(path="/shared", mode="1777"))
# Who mounts an export by default: the hosts that run jobs and the hosts users work on.
EXPORT_MOUNT_HOSTS = ["login", "compute"]


def server_exports(server: NfsServer) -> list[NfsExport]:
    return list(DEFAULT_EXPORTS) if server.exports is None else list(server.exports)


def export_options(export: NfsExport) -> list[str]:
    return list(DEFAULT_EXPORT_OPTIONS if export.options is None else export.options)


def is_world(client: str) -> bool:
    """An exports(5) client that lets every address in: `*`, or a subnet with a zero prefix."""
    return client == "*" or client.endswith(("/0", "/0.0.0.0"))


def export_clients(server: NfsServer, export: NfsExport, hosts: dict[str, ManagedHost]) -> list[str]:
    """The export's clients: the inventory's, or every other cluster host's address (in host order, once each)."""
    if export.clients is not None:
        return list(export.clients)
    own = hosts[server.host].address if server.host in hosts else None
    return list(dict.fromkeys(host.address for name, host in hosts.items() if name != server.host and host.address != own))


def exported_mounts(storage: Storage, hosts: dict[str, ManagedHost]) -> list[Mount]:
    """The mounts the server's exports add: `nfs4` from the server's address at the exported path on
    the login and compute hosts, for each export with `mount` whose path storage.mounts has no mount at."""
    server = storage.nfs_server
    if server is None or server.host not in hosts:
        return []
    taken = {normal_path(mount.path) for mount in storage.mounts}
    address = hosts[server.host].address
    source_host = f"[{address}]" if ":" in address else address
    return [Mount(source=f"{source_host}:{export.path}", path=export.path, type="nfs4", hosts=EXPORT_MOUNT_HOSTS)
            for export in server_exports(server) if export.mount and normal_path(export.path) not in taken]


def with_exported_mounts(inventory: Inventory, hosts: dict[str, ManagedHost]) -> Inventory:
    """The inventory with the server's exported mounts after storage.mounts: what every renderer,
    role variable and plan row reads as the cluster's mounts (cluster.resolve calls this once)."""
    storage = inventory.storage
    added = exported_mounts(storage, hosts) if storage is not None else []
    if not added or storage is None:
        return inventory
    mounts = [*storage.mounts, *added]
    return inventory.model_copy(update={"storage": storage.model_copy(update={"mounts": mounts})})


# The work area of the shipped exports, and the smoke jobs' work directory in it where the inventory
# does not place training.work_dir itself (docs/storage.md): the files of a job on one node, and a
# checkpoint, reach every other node.
WORK_AREA = "/shared"
SHARED_WORK_DIR = f"{WORK_AREA}/cluster-training"


def with_shared_work_dir(inventory: Inventory) -> Inventory:
    """The inventory with training.work_dir in the work area the NFS server exports and mounts, where
    the inventory does not set it (cluster.resolve calls this once)."""
    storage, training = inventory.storage, inventory.training
    server = storage.nfs_server if storage is not None else None
    if "work_dir" in training.model_fields_set or server is None:
        return inventory
    if not any(export.mount and normal_path(export.path) == WORK_AREA for export in server_exports(server)):
        return inventory
    return inventory.model_copy(update={"training": training.model_copy(update={"work_dir": SHARED_WORK_DIR})})


def exported_work_dirs(inventory: Inventory, exported: list[str]) -> list[dict[str, str]]:
    """training.work_dir where it lies inside an exported directory, as roles/nfs_server makes it on the
    server for the test user (root on a client is squashed: it could make it, but not give it away)."""
    training = inventory.training
    work_dir = normal_path(training.work_dir)
    if not any(inside(work_dir, normal_path(path)) and work_dir != normal_path(path) for path in exported):
        return []
    return [{"path": training.work_dir, "owner": training.test_user, "group": training.test_user, "mode": "0755"}]


# A home on the export: its owner's only (the server makes it, root on a client is squashed).
HOME_MODE = "0700"


def exported_homes(users: list[dict[str, Any]], exported: list[str]) -> list[dict[str, str]]:
    """The homes of people_accounts' users (not absent) that lie inside an exported directory, as
    roles/nfs_server makes them on the server: {path, owner, group, mode}."""
    roots = [normal_path(path) for path in exported]
    return [{"path": user["home"], "owner": user["name"], "group": user["group"], "mode": HOME_MODE}
            for user in users
            if user["state"] != "absent"
            and any(inside(normal_path(user["home"]), root) and normal_path(user["home"]) != root for root in roots)]


def normal_path(path: str) -> str:
    """``path`` without repeated or trailing slashes."""
    return "/" + "/".join(part for part in path.split("/") if part)


def inside(path: str, tree: str) -> bool:
    """Whether the normal ``path`` is ``tree`` or below it."""
    return path == tree or path.startswith(tree.rstrip("/") + "/")
