"""resolve/overrides.py: free-form Slurm keys may not set what the inventory sets, nor repeat in other case."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, edit, problem, problems


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("ClusterName", "cluster_name"),
        ("clustername", "cluster_name"),
        ("SlurmctldHost", "controllers.primary / controllers.backup"),
        ("SLURMUSER", "slurm.user"),
        ("NodeName", "node_groups"),
        ("TopologyPlugin", "topology.plugin"),
        ("AccountingStoragePort", "accounting.port"),
    ],
)
def test_slurm_conf_may_not_override_what_the_inventory_sets(key, field):
    text = BASE + f"slurm:\n  conf:\n    {key}: x\n"
    assert problems(text) == [
        problem(text, f"{key}: x", f"slurm.conf.{key}", f"set by the inventory: use {field}")
    ]


def test_cgroup_plugin_is_set_by_the_version():
    text = BASE + "cgroup:\n  overrides:\n    CgroupPlugin: cgroup/v1\n"
    assert problems(text) == [
        problem(
            text, "CgroupPlugin", "cgroup.overrides.CgroupPlugin", "set by the inventory: use cgroup.version"
        )
    ]


def test_partition_options_may_not_set_fields():
    text = edit(
        BASE, "    default: true\n", "    default: true\n    options:\n      MaxTime: 10\n      nodes: x\n"
    )
    assert problems(text) == [
        problem(text, "MaxTime: 10", "partitions[0].options.MaxTime", "set it with the field 'max_time'"),
        problem(text, "nodes: x", "partitions[0].options.nodes", "set it with the field 'nodes'"),
    ]


def test_keys_that_differ_only_in_case():
    text = (
        BASE
        + "slurm:\n  conf:\n    KillWait: 10\n    killwait: 20\ncgroup:\n  overrides:\n    ConstrainCores: no\n    constraincores: yes\n"
    )
    text = edit(
        text, "    default: true\n", "    default: true\n    options:\n      Hidden: yes\n      HIDDEN: no\n"
    )
    assert problems(text) == [
        problem(
            text,
            "HIDDEN: no",
            "partitions[0].options.HIDDEN",
            "the same key as 'Hidden': Slurm ignores case in keys",
        ),
        problem(
            text,
            "killwait: 20",
            "slurm.conf.killwait",
            "the same key as 'KillWait': Slurm ignores case in keys",
        ),
        problem(
            text,
            "constraincores: yes",
            "cgroup.overrides.constraincores",
            "the same key as 'ConstrainCores': Slurm ignores case in keys",
        ),
    ]


# ---- keys the target Slurm version documents (cluster_cli.slurm_facts) --------------------------


def test_a_misspelt_slurm_conf_key_is_refused_with_a_suggestion():
    text = BASE + "slurm:\n  conf:\n    SlurmctldParamters: enable_configless\n"
    assert problems(text) == [
        problem(
            text,
            "SlurmctldParamters: enable_configless",
            "slurm.conf.SlurmctldParamters",
            "not a slurm.conf key of Slurm 22.05 (slurm.conf(5)): did you mean SlurmctldParameters?",
        )
    ]


def test_a_misspelt_cgroup_key_is_refused_with_a_suggestion():
    text = BASE + "cgroup:\n  overrides:\n    ConstrainCore: yes\n"
    assert problems(text) == [
        problem(
            text,
            "ConstrainCore: yes",
            "cgroup.overrides.ConstrainCore",
            "not a cgroup.conf key of Slurm 22.05 (cgroup.conf(5)): did you mean ConstrainCores?",
        )
    ]


def test_a_key_like_no_documented_one_is_refused_without_a_suggestion():
    text = BASE + "slurm:\n  conf:\n    FavouriteColour: blue\n"
    assert problems(text) == [
        problem(text, "FavouriteColour: blue", "slurm.conf.FavouriteColour", "not a slurm.conf key of Slurm 22.05 (slurm.conf(5))")
    ]


def test_documented_keys_pass_in_any_case():
    assert problems(BASE + "slurm:\n  conf:\n    killwait: 30\n    SlurmctldDebug: info\n") == []


def test_the_key_list_is_the_one_of_the_pinned_version():
    # HashPlugin is documented from 24.11 on (docs/slurm-rules.md, keys per series)
    text = BASE + "slurm:\n  conf:\n    HashPlugin: hash/k12\n"
    assert problems(text) == [
        problem(text, "HashPlugin: hash/k12", "slurm.conf.HashPlugin", "not a slurm.conf key of Slurm 22.05 (slurm.conf(5))")
    ]
    assert problems(edit(text, "slurm:\n", "slurm:\n  version: 24.11.5-4+deb13u1\n")) == []


def test_a_version_without_key_lists_is_not_checked():
    text = BASE + "slurm:\n  version: 23.11.4-1\n  conf:\n    SlurmctldParamters: enable_configless\n"
    assert problems(text) == []
