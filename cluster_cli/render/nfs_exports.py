"""The NFS server's exports (storage.nfs_server), rendered once on the control node into one
exports(5) file that roles/nfs_server puts in /etc/exports.d: one entry per export, in path order,
each client on a line of its own (a backslash continues the entry), every client with the export's
options. /etc/exports itself stays the site's.
"""

from __future__ import annotations

from cluster_cli.cluster import Cluster
from cluster_cli.render.common import header
from cluster_cli.render.mount_units import STORAGE_BUILD_DIR
from cluster_cli.shared_storage import export_clients, export_options, server_exports

EXPORTS_FILE = "cluster-cli.exports"
EXPORTS_BUILD_PATH = f"{STORAGE_BUILD_DIR}/{EXPORTS_FILE}"
# where roles/nfs_server puts it on the server (nfs_server_exports_file); exportfs reads every
# *.exports file of this directory after /etc/exports
EXPORTS_DIR = "/etc/exports.d"


def exports_text(cluster: Cluster) -> str:
    server = cluster.inventory.storage.nfs_server if cluster.inventory.storage else None
    if server is None:
        return ""
    entries = []
    for export in sorted(server_exports(server), key=lambda export: export.path):
        options = ",".join(export_options(export))
        clients = [f"{client}({options})" for client in export_clients(server, export, cluster.hosts)]
        if not clients:  # a path without clients is exported to everyone (resolve refuses it)
            continue
        entries.append(" \\\n    ".join([export.path, *clients]))
    return header(cluster.name, f"The NFS exports of {server.host}") + "\n".join(entries) + "\n"


def render_nfs_exports(cluster: Cluster) -> dict[str, str]:
    """{build path: text}: the exports file where the inventory has an NFS server."""
    text = exports_text(cluster)
    return {EXPORTS_BUILD_PATH: text} if text else {}
