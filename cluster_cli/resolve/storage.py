"""Shared file systems (storage.mounts): mount points where a mount cannot hide the system or
Slurm's own per-host directories, one mount per path and none inside another, host selectors that
name something, sources of the form their type mounts, and a client this release can install.
The NFS server (storage.nfs_server): an inventory host, exports outside the system directories, one
per path and none inside another, never to the world, never without root_squash, and no mount of
storage.mounts over an export on the server itself."""

from __future__ import annotations

from cluster_cli.errors import Location
from cluster_cli.model import Inventory, Mount, NfsServer
from cluster_cli.resolve.hosts import ManagedHost
from cluster_cli.resolve.problems import Problems
from cluster_cli.shared_storage import (
    CLIENT_PACKAGES,
    ROLE_OF_SELECTOR,
    export_clients,
    export_options,
    inside,
    installable,
    is_world,
    normal_path,
    selected_hosts,
    server_exports,
    source_problem,
)

# A shared file system mounted at or below one of these would hide what the host boots and runs
# from (the root itself only at "/": /home, /opt, /srv, /mnt ... are where mounts belong).
SYSTEM_TREES = ("/usr", "/etc", "/var", "/boot", "/proc", "/sys", "/dev", "/run", "/bin", "/sbin",
                "/lib", "/lib32", "/lib64", "/libx32", "/root", "/tmp")


def check_storage(inventory: Inventory, hosts: dict[str, ManagedHost], problems: Problems) -> None:
    storage = inventory.storage
    if storage is None:
        return
    groups = {group.name for group in inventory.node_groups}
    first_at: dict[str, int] = {}
    for index, mount in enumerate(storage.mounts):
        at: Location = ("storage", "mounts", index)
        path = normal_path(mount.path)
        message = _system_problem(path) or _slurm_problem(inventory, path)
        if message:
            problems.add(at + ("path",), message)
        elif path in first_at:
            problems.add(at + ("path",), f"{path} is mounted by storage.mounts[{first_at[path]}] already")
        else:
            _check_nested(storage.mounts, index, path, problems)
        first_at.setdefault(path, index)
        _check_selectors(mount, groups, hosts, at, problems)
        _check_client(mount, at, problems)
    if storage.nfs_server is not None:
        check_nfs_server(inventory, storage.nfs_server, hosts, problems)


def _system_problem(path: str) -> str | None:
    if path == "/":
        return "/ is the root file system: mount a shared file system at a directory of its own (e.g. /shared)"
    tree = next((tree for tree in SYSTEM_TREES if inside(path, tree)), None)
    if tree is None:
        return None
    return f"{path} is inside the system directory {tree}: a mount there would hide the host's own files"


def _slurm_problem(inventory: Inventory, path: str) -> str | None:
    """Slurm's per-host directories may not be on, under or above a mount. The state directory may
    be a mount (primary and backup controllers share StateSaveLocation), not inside one's child."""
    paths = inventory.slurm.paths
    for field in ("conf_dir", "spool_dir", "log_dir", "run_dir"):
        directory = normal_path(getattr(paths, field))
        if inside(path, directory) or inside(directory, path):
            return f"{path} would hold or hide slurm.paths.{field} {directory}, which each host keeps on its own disk"
    state = normal_path(paths.state_dir)
    if path != state and inside(path, state):
        return f"{path} is inside slurm.paths.state_dir {state}: mount the state directory itself, or elsewhere"
    return None


def _check_nested(mounts: list[Mount], index: int, path: str, problems: Problems) -> None:
    for other_index, other in enumerate(mounts):
        other_path = normal_path(other.path)
        if other_index != index and other_path != path and inside(path, other_path):
            problems.add(("storage", "mounts", index, "path"),
                         f"{path} is inside {other_path}, the mount point of storage.mounts[{other_index}]: "
                         "a mount over another hides it until the outer one is mounted; give it a path of its own")
            return


def _check_selectors(mount: Mount, groups: set[str], hosts: dict[str, ManagedHost], at: Location,
                     problems: Problems) -> None:
    bad = False
    for position, name in enumerate(mount.hosts or []):
        if name in ROLE_OF_SELECTOR and name in groups:
            problems.add(at + ("hosts", position), f"{name!r} is both a role and a node group's name: rename the group")
            bad = True
        elif name not in ROLE_OF_SELECTOR and name not in groups:
            known = ", ".join([*ROLE_OF_SELECTOR, *sorted(groups)])
            problems.add(at + ("hosts", position), f"{name!r} is neither a role nor a node group ({known})")
            bad = True
    if mount.hosts is not None and not bad and not selected_hosts(hosts, mount):
        problems.add(at + ("hosts",), f"selects no host: {', '.join(mount.hosts)} has none in this inventory")


def _check_client(mount: Mount, at: Location, problems: Problems) -> None:
    if not installable(mount):
        known = ", ".join(name for name, packages in CLIENT_PACKAGES.items() if packages)
        problems.add(at + ("type",), f"this release cannot install a client for {mount.type!r} (it installs one for "
                                     f"{known}): install it on the hosts yourself and set client_installed: true")
    problem = source_problem(mount)
    if problem:
        problems.add(at + ("source",), problem)


def check_nfs_server(inventory: Inventory, server: NfsServer, hosts: dict[str, ManagedHost], problems: Problems) -> None:
    at: Location = ("storage", "nfs_server")
    if server.host not in hosts:
        problems.add(at + ("host",), f"{server.host!r} is not a host of this inventory ({', '.join(list(hosts)[:8])}"
                                     f"{' ...' if len(hosts) > 8 else ''}): the NFS server must be one the deploy configures")
    exports = server_exports(server)
    paths = [normal_path(export.path) for export in exports]
    for index, export in enumerate(exports):
        # the shipped exports are not in the file: their problems are the section's
        export_at: Location = at + ("exports", index) if server.exports is not None else at
        path_at = export_at + ("path",) if server.exports is not None else at
        _check_export_path(inventory, paths, index, path_at, problems)
        _check_export_access(export.clients or [], export_options(export), export_at, problems)
        if server.host in hosts:
            if not export_clients(server, export, hosts):
                problems.add(export_at, f"{paths[index]} has no client: the cluster has no host besides {server.host}; "
                                        "name its clients (exportfs exports a path without clients to everyone)")
            _check_mounted_over(inventory, hosts, server.host, paths[index], path_at, problems)


def _check_export_path(inventory: Inventory, paths: list[str], index: int, at: Location, problems: Problems) -> None:
    path = paths[index]
    message = _system_export_problem(path) or _slurm_problem(inventory, path)
    if message:
        problems.add(at, message)
    elif path in paths[:index]:
        problems.add(at, f"{path} is exported by storage.nfs_server.exports[{paths.index(path)}] already")
    else:
        _check_nested_export(paths, index, at, problems)


def _system_export_problem(path: str) -> str | None:
    tree = "/" if path == "/" else next((tree for tree in SYSTEM_TREES if inside(path, tree)), None)
    if tree is None:
        return None
    where = "the root file system" if tree == "/" else f"inside the system directory {tree}"
    return f"{path} is {where}: the clients would get the server's own system files; export a directory of its own"


def _check_nested_export(paths: list[str], index: int, at: Location, problems: Problems) -> None:
    for other_index, other in enumerate(paths):
        if other_index != index and other not in (paths[index], "/") and inside(paths[index], other):
            problems.add(at, f"{paths[index]} is inside {other}, exported by storage.nfs_server.exports"
                                         f"[{other_index}]: a client of both would see one through the other; export it once")
            return


def _check_export_access(clients: list[str], options: list[str], at: Location, problems: Problems) -> None:
    for position, client in enumerate(clients):
        if is_world(client):
            problems.add(at + ("clients", position),
                         f"{client!r} exports to the world: name the cluster's hosts or subnets (e.g. 10.0.0.0/16)")
    for position, option in enumerate(options):
        if option == "no_root_squash":
            problems.add(at + ("options", position),
                         "no_root_squash lets root on any client own every file of the export: keep root_squash "
                         "(the homes are made on the server itself, docs/storage.md)")


def _check_mounted_over(inventory: Inventory, hosts: dict[str, ManagedHost], server: str, path: str, at: Location,
                        problems: Problems) -> None:
    """A mount of storage.mounts that the server itself mounts on or above an exported directory
    would hide the export (the server would export the client's view of another file system)."""
    storage = inventory.storage
    for index, mount in enumerate(storage.mounts if storage is not None else []):
        mounted = normal_path(mount.path)
        if inside(path, mounted) and server in selected_hosts(hosts, mount):
            problems.add(at, f"{path} would be hidden on {server} by storage.mounts[{index}] ({mounted}), "
                                         "which that host mounts: leave the server out of that mount's hosts")
            return
