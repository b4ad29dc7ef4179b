"""The node health check's expectations: one document for the cluster, each host's file made from it.

roles/slurmd installs the checker (roles/slurmd/files/cluster-cli-health, Slurm's
HealthCheckProgram) and its host's file beside it; slurmd runs the checker with SLURMD_NODENAME set,
and the checker looks its node up there: the CPUs, memory and GPU device files slurm.conf and
gres.conf give it, its spool directory, the slurm.conf its scontrol reads. The checker cannot import
cluster_cli, so the reason prefix travels in the file: it is defined here only.

The build directory holds one document, health/expectations.json (``render_health_document``):
the check's settings, each kind of node's expectations (the nodes of a group with the same GPU
device files) and each node's kind. A host's file is made from it by
cluster_cli/health_expectations.py, for the role (its ``health_config_text`` filter) and for `plan`
alike: what the nodes of a group share is written once, not once per host (one file per host, then
one text per host in 256 bundles, were most of a render of 10,000 nodes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cluster_cli.cluster import Cluster, SlurmNode
from cluster_cli.health_expectations import HEALTH_REASON_PREFIX, HostHealthTexts
from cluster_cli.render.common import json_string, json_text
from cluster_cli.shared_storage import mounts_by_host

# Where roles/slurmd installs the checker and its configuration (slurmd passes the program no
# arguments, so the checker's default config path is this one; a unit test holds them equal).
HEALTH_PROGRAM_PATH = "/usr/local/sbin/cluster-cli-health"
HEALTH_CONFIG_PATH = "/etc/cluster-cli-health.json"
# The build directory's folder of the health check's document, and the document's name in it.
HEALTH_BUILD_DIR = "health"
HEALTH_DOCUMENT = "expectations.json"


def _check_settings(cluster: Cluster) -> dict[str, Any]:
    """What every host's file holds before its nodes."""
    settings = cluster.inventory.health_check
    return {"reason_prefix": HEALTH_REASON_PREFIX, "min_free_mb": settings.min_free_mb, "mounts": list(settings.mounts)}


def _kind_expectations(node: SlurmNode, mounts: tuple[str, ...]) -> dict[str, Any]:
    """What a node expects that is the same for the nodes of its kind (its group's, mostly devices,
    and its host's shared mounts: storage.mounts)."""
    group = node.group
    expected: dict[str, Any] = {
        "cpus": group.cpus or group.sockets * group.cores_per_socket * group.threads_per_core,
        "real_memory_mb": group.real_memory_mb,
        "gpus": group.gpus.count if group.gpus else 0,
        "gpu_devices": list(node.gpu_devices),
    }
    if mounts:
        expected["mounts"] = list(mounts)
    return expected


def health_document(cluster: Cluster) -> dict[str, Any] | None:
    """The expectations of every node that runs on a compute host (health_expectations.py reads
    them); None when the check is off."""
    if not cluster.inventory.health_check.enabled:
        return None
    paths = cluster.inventory.slurm.paths
    kinds: dict[tuple[int, tuple[str, ...], tuple[str, ...]], int] = {}
    examples: list[tuple[SlurmNode, tuple[str, ...]]] = []
    node_kinds: dict[str, int] = {}
    mounts = _shared_mounts(cluster)
    for host in cluster.hosts.values():
        for node in host.slurmd_nodes:
            key = (id(node.group), node.gpu_devices, mounts[host.name])
            kind = kinds.get(key)
            if kind is None:
                kind = kinds[key] = len(examples)
                examples.append((node, mounts[host.name]))
            node_kinds[node.name] = kind
    return {
        "check": _check_settings(cluster),
        "conf_dir": paths.conf_dir,
        "configless": cluster.inventory.slurm.configless,
        "spool_dir": paths.spool_dir,
        "work_dir": cluster.inventory.training.work_dir,
        "kinds": [_kind_expectations(node, node_mounts) for node, node_mounts in examples],
        "nodes": node_kinds,
    }


def _shared_mounts(cluster: Cluster) -> dict[str, tuple[str, ...]]:
    """Each host's storage.mounts paths (shared_storage decides which host mounts which)."""
    storage = cluster.inventory.storage
    by_host = mounts_by_host(cluster.inventory, cluster.hosts)
    return {name: tuple(storage.mounts[index].path for index in indexes) if storage else ()
            for name, indexes in by_host.items()}


def render_health_document(cluster: Cluster) -> dict[str, str]:
    """Build directory path -> text of the document: json_text's, with each node on one line."""
    document = health_document(cluster)
    if document is None:
        return {}
    nodes = document.pop("nodes")
    head = json_text(document)[:-2]  # without the closing "\n}": "nodes" goes last
    lines = ",".join(f"\n    {json_string(name)}: {kind}" for name, kind in nodes.items())
    return {f"{HEALTH_BUILD_DIR}/{HEALTH_DOCUMENT}": f'{head},\n  "nodes": {{{lines}\n  }}\n}}\n'}


def host_health_path(host_name: str) -> str:
    """The name `plan` knows a host's file by: DOCUMENT:HOST (no host name has a colon, so it is
    never a path of the build)."""
    return f"{HEALTH_BUILD_DIR}/{HEALTH_DOCUMENT}:{host_name}"


def with_host_health_texts(rendered: Mapping[str, str], cluster: Cluster) -> dict[str, str]:
    """The build's files by path, plus the text of each compute host's file under host_health_path,
    made from the document: what `plan` compares a host's /etc/cluster-cli-health.json with."""
    expanded = dict(rendered)
    document = rendered.get(f"{HEALTH_BUILD_DIR}/{HEALTH_DOCUMENT}")
    if document is not None:
        texts = HostHealthTexts(json.loads(document))
        expanded.update(
            (host_health_path(name), texts.text(node.name for node in host.slurmd_nodes))
            for name, host in cluster.hosts.items()
            if host.slurmd_nodes
        )
    return expanded
