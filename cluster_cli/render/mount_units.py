"""The shared file systems (storage.mounts) as systemd units, rendered once on the control node:
one `.mount` unit per mount (and an `.automount` unit where it mounts on first access), the same
file on every host that mounts it; and the /etc/fstab line of each, which roles/storage_client puts
in a marked block on hosts without systemd.

A unit's name is its mount point escaped as `systemd-escape --path` does it: systemd only accepts a
mount unit whose name is its `Where=`.
"""

from __future__ import annotations

import re

from cluster_cli.cluster import Cluster
from cluster_cli.model import Mount
from cluster_cli.render.common import header
from cluster_cli.shared_storage import install_target, mount_options

STORAGE_BUILD_DIR = "storage"
# where roles/storage_client puts the units on the hosts (storage_client_units_dir)
UNITS_DIR = "/etc/systemd/system"
# The line that marks a unit as cluster-cli's: the role removes such a unit only when the
# inventory no longer has it, and leaves every other unit alone.
UNIT_MARKER = "# cluster-cli storage.mounts"
# systemd-escape leaves these as they are (besides "/", which becomes "-")
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.")


def escape_path(path: str) -> str:
    """``systemd-escape --path PATH``: the path without repeated, leading and trailing slashes, each
    "/" as "-", a leading "." and every byte outside [A-Za-z0-9:_.] as \\xNN; "/" itself is "-"."""
    trimmed = "/".join(part for part in path.split("/") if part)
    if not trimmed:
        return "-"
    out = []
    for position, byte in enumerate(trimmed.encode("utf-8")):
        char = chr(byte)
        if char == "/":
            out.append("-")
        elif char in _PLAIN and not (position == 0 and char == "."):
            out.append(char)
        else:
            out.append(f"\\x{byte:02x}")
    return "".join(out)


def unescape_path(name: str) -> str:
    """The mount point a unit name (without its suffix) stands for: escape_path undone."""
    if name == "-":
        return "/"
    text = name.replace("-", "/")
    raw = re.sub(r"\\x([0-9a-f]{2})", lambda match: chr(int(match.group(1), 16)), text)
    return "/" + raw.encode("latin-1").decode("utf-8", errors="replace")


def unit_name(mount: Mount, kind: str = "mount") -> str:
    return f"{escape_path(mount.path)}.{kind}"


def _unit_value(value: str) -> str:
    return value.replace("%", "%%")  # systemd would expand %x specifiers


def mount_unit(cluster: Cluster, mount: Mount) -> str:
    options = mount_options(mount)
    lines = [
        header(cluster.name, f"The mount of {mount.path}").rstrip("\n"),
        UNIT_MARKER,
        "[Unit]",
        f"Description=Shared file system {_unit_value(mount.path)} (cluster-cli storage.mounts)",
        "",
        "[Mount]",
        f"What={_unit_value(mount.source)}",
        f"Where={mount.path}",
        f"Type={mount.type}",
    ]
    if options:
        lines.append(f"Options={_unit_value(','.join(options))}")
    if not mount.automount:  # an automounted one is started by its .automount unit on first access
        lines += ["", "[Install]", f"WantedBy={install_target(options)}"]
    return "\n".join(lines) + "\n"


def automount_unit(cluster: Cluster, mount: Mount) -> str:
    return "\n".join([
        header(cluster.name, f"The automount of {mount.path}").rstrip("\n"),
        UNIT_MARKER,
        "[Unit]",
        f"Description=Shared file system {_unit_value(mount.path)} on first access (cluster-cli storage.mounts)",
        "",
        "[Automount]",
        f"Where={mount.path}",
        "",
        "[Install]",
        f"WantedBy={install_target(mount_options(mount))}",
    ]) + "\n"


def fstab_line(mount: Mount) -> str:
    """The mount's /etc/fstab line (hosts without systemd; no automount there)."""
    options = ",".join(mount_options(mount)) or "defaults"
    return f"{mount.source} {mount.path} {mount.type} {options} 0 0"


def render_mount_units(cluster: Cluster) -> dict[str, str]:
    """{build path: text}: every mount's units, where the inventory has storage."""
    storage = cluster.inventory.storage
    files: dict[str, str] = {}
    for mount in storage.mounts if storage is not None else []:
        files[f"{STORAGE_BUILD_DIR}/{unit_name(mount)}"] = mount_unit(cluster, mount)
        if mount.automount:
            files[f"{STORAGE_BUILD_DIR}/{unit_name(mount, 'automount')}"] = automount_unit(cluster, mount)
    return files
