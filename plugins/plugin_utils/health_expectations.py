"""A compute host's health check file (/etc/cluster-cli-health.json) from the cluster's expectations.

`render` writes one document for the whole cluster, BUILD_DIR/health/expectations.json
(render/health_conf.py): the check's settings, what the nodes of each kind expect (a kind: the nodes
of one group with the same GPU device files) and each node's kind. A host's file is the settings
and, for each of its Slurm nodes, its kind's expectations and the paths named after the node.
roles/slurmd (the ``health_config_text`` filter) and `plan` both make it here, so the two never
differ; the checker (roles/slurmd/files/cluster-cli-health) reads it.

Standard library only: the role's filter imports it in every Ansible worker. Its home is the
collection's plugins/plugin_utils/ (the filter imports it from there, as
ansible_collections.cluster_cli.slurm.plugins.plugin_utils.health_expectations);
cluster_cli/health_expectations.py is a link to it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

# json.dumps's own string writer (ensure_ascii), without setting up an encoder at every call
_json_string = json.encoder.encode_basestring_ascii

# A drain whose reason starts with this is the health check's own: it lifts it when the node
# passes again. Any other reason (an administrator's, `cluster-cli nodes drain`'s, Slurm's) it
# never touches. The roles' post-check (filter slurm_nodes_not_ready) counts it as a failure.
HEALTH_REASON_PREFIX = "cluster-cli health:"


class UnknownNode(KeyError):
    """A Slurm node the expectations do not know: the document is of another inventory."""

    def __str__(self) -> str:
        return f"the health check's expectations have no node {self.args[0]!r}: render again"


def node_paths(document: Mapping[str, Any], node: str) -> dict[str, Any]:
    """What a node expects that is named after it: its spool directory, and the slurm.conf its
    scontrol reads (in configless mode the copy its slurmd fetched)."""
    spool_dir = f"{document['spool_dir']}/{node}"
    slurm_conf = f"{spool_dir}/conf-cache/slurm.conf" if document["configless"] else f"{document['conf_dir']}/slurm.conf"
    return {"slurm_conf": slurm_conf, "free_space_dirs": [spool_dir, document["work_dir"]]}


def _kind_of(document: Mapping[str, Any], node: str) -> int:
    try:
        return document["nodes"][node]
    except KeyError:
        raise UnknownNode(node) from None


def host_health_config(document: Mapping[str, Any], nodes: Iterable[str]) -> dict[str, Any]:
    """The host's file as data: the check's settings, then each of ``nodes`` (its Slurm node names)."""
    kinds = document["kinds"]
    return {
        **document["check"],
        "nodes": {node: {**kinds[_kind_of(document, node)], **node_paths(document, node)} for node in nodes},
    }


class HostHealthTexts:
    """``json.dumps(host_health_config(document, nodes), indent=2) + "\\n"``, the very text, with
    what hosts share (the settings, each kind's expectations) written once: `plan` makes one for
    every compute host of the cluster."""

    def __init__(self, document: Mapping[str, Any]):
        self._document = document
        # the file up to its first node: the settings, then "nodes" opened
        self._head = json.dumps(document["check"], indent=2)[:-2] + ',\n  "nodes": {'
        self._kinds: dict[int, str] = {}
        self._work_dir = _json_string(document["work_dir"])

    def text(self, nodes: Iterable[str]) -> str:
        body = ",".join(f"\n    {_json_string(node)}: {self._node_text(node)}" for node in nodes)
        return self._head + body + "\n  }\n}\n"

    def _node_text(self, node: str) -> str:
        kind = _kind_of(self._document, node)
        start = self._kinds.get(kind)
        if start is None:
            # the kind's members, three levels deep, without the closing "\n    }"; the node's own follow
            members = json.dumps(self._document["kinds"][kind], indent=2).replace("\n", "\n    ")
            start = self._kinds[kind] = members[:-6] + ","
        paths = node_paths(self._document, node)
        spool_dir, slurm_conf = _json_string(paths["free_space_dirs"][0]), _json_string(paths["slurm_conf"])
        return (
            f'{start}\n      "slurm_conf": {slurm_conf},\n      "free_space_dirs": [\n'
            f"        {spool_dir},\n        {self._work_dir}\n      ]\n    }}"
        )
