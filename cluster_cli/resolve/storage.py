"""Shared file systems (storage.mounts): mount points where a mount cannot hide the system or
Slurm's own per-host directories, one mount per path and none inside another, host selectors that
name something, sources of the form their type mounts, and a client this release can install."""

from __future__ import annotations

from cluster_cli.errors import Location
from cluster_cli.model import Inventory, Mount
from cluster_cli.resolve.hosts import ManagedHost
from cluster_cli.resolve.problems import Problems
from cluster_cli.shared_storage import CLIENT_PACKAGES, ROLE_OF_SELECTOR, installable, selected_hosts, source_problem

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
        path = _normal(mount.path)
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


def _normal(path: str) -> str:
    return "/" + "/".join(part for part in path.split("/") if part)


def _inside(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def _system_problem(path: str) -> str | None:
    if path == "/":
        return "/ is the root file system: mount a shared file system at a directory of its own (e.g. /shared)"
    tree = next((tree for tree in SYSTEM_TREES if _inside(path, tree)), None)
    if tree is None:
        return None
    return f"{path} is inside the system directory {tree}: a mount there would hide the host's own files"


def _slurm_problem(inventory: Inventory, path: str) -> str | None:
    """Slurm's per-host directories may not be on, under or above a mount. The state directory may
    be a mount (primary and backup controllers share StateSaveLocation), not inside one's child."""
    paths = inventory.slurm.paths
    for field in ("conf_dir", "spool_dir", "log_dir", "run_dir"):
        directory = _normal(getattr(paths, field))
        if _inside(path, directory) or _inside(directory, path):
            return f"{path} would hold or hide slurm.paths.{field} {directory}, which each host keeps on its own disk"
    state = _normal(paths.state_dir)
    if path != state and _inside(path, state):
        return f"{path} is inside slurm.paths.state_dir {state}: mount the state directory itself, or elsewhere"
    return None


def _check_nested(mounts: list[Mount], index: int, path: str, problems: Problems) -> None:
    for other_index, other in enumerate(mounts):
        other_path = _normal(other.path)
        if other_index != index and other_path != path and _inside(path, other_path):
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
