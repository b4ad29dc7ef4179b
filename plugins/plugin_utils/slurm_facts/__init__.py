"""The Slurm facts that decide what a configuration change needs, per Slurm series: one home.

The roles' deploy logic (plugins/filter/cluster_filters.py ``slurm_conf_change``) and
``cluster-cli plan`` both ask this package; neither keeps a copy of the rules. The facts are data:
data/slurm-<series>.json, derived from each series' own man pages (and the plugin files of its
Debian packages, for ``plugin_problems``) by devtools/slurm_docs.py, and
data/rules.json, the facts a person read from the man pages and SchedMD's guides, each quoted with
its source. docs/slurm-rules.md shows them all.

Standard library only; the data is read on first use and kept. Its home is the collection's
plugins/plugin_utils/slurm_facts/ (the filter imports it from there, as
ansible_collections.cluster_cli.slurm.plugins.plugin_utils.slurm_facts, so its modules import each
other relatively); every file of cluster_cli/slurm_facts/ is a link to its file here.
"""

from __future__ import annotations

from .change import ConfChange, conf_change, host_conf_change
from .facts import (
    DEFAULT_SERIES,
    UnknownSlurmVersion,
    has_facts,
    known_keys,
    rules_series,
    series,
    supported_series,
)
from .plugins import plugin_problems, shipped_plugins
from .upgrade_path import upgrade_path_problem

__all__ = [
    "DEFAULT_SERIES",
    "ConfChange",
    "UnknownSlurmVersion",
    "conf_change",
    "has_facts",
    "host_conf_change",
    "known_keys",
    "plugin_problems",
    "rules_series",
    "series",
    "shipped_plugins",
    "supported_series",
    "upgrade_path_problem",
]
