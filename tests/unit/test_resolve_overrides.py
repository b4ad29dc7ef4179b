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
