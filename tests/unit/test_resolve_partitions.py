"""resolve/partitions.py: the nodes of each partition, and every node in one."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, FILE, edit, expected_problems, line_of, load, problems


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "    default: true\n",
            "    default: true\n  - name: more\n    nodes: [gpu]\n    default: true\n",
            [("partitions:", "partitions", "only one partition can be the default, not all, more")],
            id="only_one_default_partition",
        ),
        pytest.param(
            "nodes: [gpu, dev]",
            "nodes: [gpu, dev, 'gpu[4-5]']",
            [("nodes: [gpu, dev,", "partitions[0].nodes[2]", "'gpu5' is neither a node group nor a node")],
            id="partition_member_that_is_neither_group_nor_node",
        ),
        pytest.param(
            "nodes: [gpu, dev]",
            "nodes: [gpu, dev, 'x[1-']",
            [("nodes: [gpu, dev,", "partitions[0].nodes[2]", "unclosed '[' in 'x[1-'")],
            id="partition_member_that_is_a_bad_hostlist",
        ),
        pytest.param(
            "nodes: [gpu, dev]",
            "nodes: ['gpu[1-2]']",
            [("partitions:", "partitions", "nodes in no partition: dev[1-2],gpu[3-4]")],
            id="nodes_in_no_partition",
        ),
    ],
)
def test_partition_problems(old, new, expected):
    text = edit(BASE, old, new)
    assert problems(text) == expected_problems(text, expected)


def test_partition_declared_twice():
    text = edit(BASE, "    default: true\n", "    default: true\n  - name: all\n    nodes: [gpu]\n")
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'nodes: [gpu]$') - 1}: partitions[1].name: partition 'all' is declared twice"
    ]


def test_partition_members_are_groups_or_hostlists_without_repeats():
    text = edit(BASE, "nodes: [gpu, dev]", "nodes: [gpu, 'gpu[1-2],dev[1-2]', dev]")
    cluster = load(text)
    assert cluster.partition_nodes["all"] == ["gpu1", "gpu2", "gpu3", "gpu4", "dev1", "dev2"]


def test_partition_keeps_the_groups_it_names_apart_from_the_nodes_its_hostlists_name():
    # what slurm.conf's Nodes= (the named groups' pieces, compressed once) and the partition's
    # default memory (the groups of its nodes) are made from
    text = edit(BASE, "nodes: [gpu, dev]", "nodes: ['dev[2],gpu[1-2]', gpu, 'dev[1]']")
    members = load(text).partitions["all"]
    assert members.names == ["dev2", "gpu1", "gpu2", "gpu3", "gpu4", "dev1"]
    assert [group.name for group in members.named_groups] == ["gpu"]
    assert members.listed == ["dev2", "gpu1", "gpu2", "dev1"]
    assert [group.name for group in members.groups] == ["dev", "gpu"]
