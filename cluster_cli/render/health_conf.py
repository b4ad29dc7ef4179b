"""The node health check's expectations, one JSON text per compute host, shipped in bundles.

roles/slurmd installs the checker (roles/slurmd/files/cluster-cli-health, Slurm's
HealthCheckProgram) and its host's text beside it; slurmd runs the checker with SLURMD_NODENAME set,
and the checker looks its node up there: the CPUs, memory and GPU device files slurm.conf and
gres.conf give it, its spool directory, the slurm.conf its scontrol reads. The checker cannot import
cluster_cli, so the reason prefix travels in the file: it is defined here only.

The build directory holds the texts in at most 256 bundles, not one file per host (creating 10,000
files was most of a render of 10,000 nodes): health/XX.json maps each host whose name's SHA-1 starts
with the hex digits XX to its text, which the role looks up (``inventory_hostname | hash('sha1')``)
and writes as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cluster_cli.cluster import Cluster, ManagedHost, SlurmNode
from cluster_cli.render.common import json_string, json_text, json_text_at

# A drain whose reason starts with this is the health check's own: it lifts it when the node
# passes again. Any other reason (an administrator's, `cluster-cli nodes drain`'s, Slurm's) it
# never touches.
HEALTH_REASON_PREFIX = "cluster-cli health:"
# Where roles/slurmd installs the checker and its configuration (slurmd passes the program no
# arguments, so the checker's default config path is this one; a unit test holds them equal).
HEALTH_PROGRAM_PATH = "/usr/local/sbin/cluster-cli-health"
HEALTH_CONFIG_PATH = "/etc/cluster-cli-health.json"
# The build directory's folder of bundles: health/XX.json (health_bundle).
HEALTH_BUILD_DIR = "health"
# Hex digits of the SHA-1 of a host's name that name its bundle: 16 ** 2 bundles at most.
_BUNDLE_DIGITS = 2


def _slurm_conf(cluster: Cluster, spool_dir: str) -> str:
    """The slurm.conf the node's scontrol reads: in configless mode the copy its slurmd fetched."""
    if cluster.inventory.slurm.configless:
        return f"{spool_dir}/conf-cache/slurm.conf"
    return f"{cluster.inventory.slurm.paths.conf_dir}/slurm.conf"


def node_expectations(cluster: Cluster, node: SlurmNode) -> dict[str, Any]:
    return {**_group_expectations(node), **_own_expectations(cluster, node)}


def _group_expectations(node: SlurmNode) -> dict[str, Any]:
    """What a node expects that is the same for the nodes of its group (their devices, mostly)."""
    group = node.group
    return {
        "cpus": group.cpus or group.sockets * group.cores_per_socket * group.threads_per_core,
        "real_memory_mb": group.real_memory_mb,
        "gpus": group.gpus.count if group.gpus else 0,
        "gpu_devices": list(node.gpu_devices),
    }


def _spool_dir(cluster: Cluster, node: SlurmNode) -> str:
    return f"{cluster.inventory.slurm.paths.spool_dir}/{node.name}"


def _own_expectations(cluster: Cluster, node: SlurmNode) -> dict[str, Any]:
    spool_dir = _spool_dir(cluster, node)
    return {
        "slurm_conf": _slurm_conf(cluster, spool_dir),
        "free_space_dirs": [spool_dir, cluster.inventory.training.work_dir],
    }


def _check_settings(cluster: Cluster) -> dict[str, Any]:
    """What every host's file holds before its nodes."""
    settings = cluster.inventory.health_check
    return {"reason_prefix": HEALTH_REASON_PREFIX, "min_free_mb": settings.min_free_mb, "mounts": list(settings.mounts)}


def host_health_config(cluster: Cluster, host: ManagedHost) -> dict[str, Any]:
    return {
        **_check_settings(cluster),
        "nodes": {node.name: node_expectations(cluster, node) for node in host.slurmd_nodes},
    }


def health_bundle(host_name: str) -> str:
    """The build directory path of the bundle with ``host_name``'s text (roles/slurmd/vars/main.yml
    finds it the same way: a unit test holds the two equal)."""
    digest = hashlib.sha1(host_name.encode("utf-8"), usedforsecurity=False).hexdigest()
    return f"{HEALTH_BUILD_DIR}/{digest[:_BUNDLE_DIGITS]}.json"


def host_health_path(host_name: str) -> str:
    """The name `plan` knows a host's text by: BUNDLE:HOST, its entry in its bundle (no host name
    has a colon, so it is never a bundle's path)."""
    return f"{health_bundle(host_name)}:{host_name}"


def render_health_texts(cluster: Cluster) -> dict[str, str]:
    """Host name -> the text of its /etc/cluster-cli-health.json, for every host that runs slurmd;
    none when the check is off."""
    if not cluster.inventory.health_check.enabled:
        return {}
    # json_text(host_health_config(...)), the very text, each piece hosts share written once
    head = json_text(_check_settings(cluster))[:-2] + ',\n  "nodes": {'
    shared: dict[tuple[int, tuple[str, ...]], str] = {}
    return {
        name: head + ",".join(f"\n    {json_string(node.name)}: {_node_text(cluster, node, shared)}"
                              for node in host.slurmd_nodes) + "\n  }\n}\n"
        for name, host in cluster.hosts.items()
        if host.slurmd_nodes
    }


def _node_text(cluster: Cluster, node: SlurmNode, shared: dict[tuple[int, tuple[str, ...]], str]) -> str:
    """``node_expectations`` as json_text writes it inside a host's "nodes"; ``shared`` keeps the
    text of _group_expectations by group and devices."""
    key = (id(node.group), tuple(node.gpu_devices))
    start = shared.get(key)
    if start is None:
        # the members without the closing "\n    }", then the node's own after a comma
        start = shared[key] = json_text_at(_group_expectations(node), 2)[:-6] + ","
    # _own_expectations, written here (a unit test holds the text to json.dumps's)
    spool_dir = _spool_dir(cluster, node)
    slurm_conf = json_string(_slurm_conf(cluster, spool_dir))
    work_dir = json_string(cluster.inventory.training.work_dir)
    return (
        f'{start}\n      "slurm_conf": {slurm_conf},\n      "free_space_dirs": [\n'
        f"        {json_string(spool_dir)},\n        {work_dir}\n      ]\n    }}"
    )


def render_health_configs(cluster: Cluster) -> dict[str, str]:
    """Build directory path -> text of the bundles (health_bundle), hosts in inventory order."""
    bundles: dict[str, list[str]] = {}
    for name, text in render_health_texts(cluster).items():
        # json_text's member line, written here: a name and a text, both strings
        bundles.setdefault(health_bundle(name), []).append(f"\n  {json_string(name)}: {json_string(text)}")
    return {path: "{" + ",".join(bundles[path]) + "\n}\n" for path in sorted(bundles)}


def with_host_health_texts(rendered: Mapping[str, str]) -> dict[str, str]:
    """The build's files by path, plus each host's health text under host_health_path, taken out of
    the bundles: what `plan` compares a host's /etc/cluster-cli-health.json with."""
    expanded = dict(rendered)
    for path, text in rendered.items():
        if path.startswith(f"{HEALTH_BUILD_DIR}/"):
            # host_health_path's names, without the SHA-1 of each: the bundle is the path at hand
            expanded.update((f"{path}:{name}", host_text) for name, host_text in json.loads(text).items())
    return expanded
