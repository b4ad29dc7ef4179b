"""Cluster.group_hostlist and Cluster.partition_hostlist: what slurm.conf and gres.conf write, built
from each group's pieces compressed once, is hostlist.compress of the very names; and a partition's
groups, found from the groups it names and the nodes its hostlists name, are the groups of its nodes."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, SHIPPED_INVENTORIES, benchmark_module, edit, load

from cluster_cli import hostlist
from cluster_cli.cluster import Cluster
from cluster_cli.loader import load_cluster, load_cluster_text


def assert_hostlists_are_those_of_compress(cluster: Cluster) -> None:
    for group in cluster.inventory.node_groups:
        assert cluster.group_hostlist(group) == hostlist.compress([node.name for node in cluster.group_nodes(group)])
    group_of = {node.name: node.group for node in cluster.nodes}
    for name, names in cluster.partition_nodes.items():
        assert cluster.partition_hostlist(name) == hostlist.compress(names), name
        groups_of_nodes = {id(group_of[node]): group_of[node] for node in names}
        assert [id(group) for group in cluster.partitions[name].groups] == list(groups_of_nodes), name


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_shipped_inventories(name):
    assert_hostlists_are_those_of_compress(load_cluster(SHIPPED_INVENTORIES[name]))


@pytest.mark.parametrize("shape", ["groups-19", "small-304", "4-groups-10k"])
def test_the_benchmark_shapes(shape):
    with benchmark_module("render_scale") as scale:
        text = scale.SHAPES[shape]()
    assert_hostlists_are_those_of_compress(load_cluster_text(text, f"{shape}.yaml"))


@pytest.mark.parametrize(
    "nodes",
    [
        "[gpu, dev]",  # two groups, two prefixes
        "[gpu, 'gpu[1-2]', dev]",  # a group and a hostlist of its nodes: one prefix, left to compress
        "['gpu[3-4]', 'gpu[1-2]', dev]",  # hostlists that make one run together
        "['gpu4', gpu, 'dev[1-2]', 'dev1']",  # repeats
    ],
)
def test_partitions_whose_parts_share_a_prefix(nodes):
    cluster = load(edit(BASE, "nodes: [gpu, dev]", f"nodes: {nodes}"))
    assert_hostlists_are_those_of_compress(cluster)
