"""benchmarks/render_scale.py's shapes are the clusters it claims (issue 17 item 5): 9,728 nodes in 19
groups with 163 switches in three levels, four overlapping partitions and HA controllers; 304 groups
of 32 the same size; the 50,000-node points only counted (loading them is the benchmark's job)."""

from __future__ import annotations

import pytest
from unit_helpers import benchmark_module

from cluster_cli.loader import load_cluster_text


@pytest.fixture(scope="module")
def scale():
    with benchmark_module("render_scale") as module:
        yield module


@pytest.mark.parametrize(("shape", "groups"), [("groups-19", 19), ("small-304", 304)])
def test_the_10k_shapes_are_valid_clusters_of_the_issue(scale, shape, groups):
    cluster = load_cluster_text(scale.SHAPES[shape](), f"{shape}.yaml")
    assert len(cluster.nodes) == 9_728
    assert len(cluster.inventory.node_groups) == groups
    assert cluster.inventory.controllers.backup == "ctl2"
    switches = cluster.inventory.topology.switches
    assert len(switches) == 163
    assert sum(1 for switch in switches if switch.switches) == 11  # 10 spines and the core
    partitions = cluster.partition_nodes
    assert set(partitions) == {"all", "gpu", "half", "debug"}
    assert len(partitions["all"]) == 9_728
    assert set(partitions["debug"]) <= set(partitions["half"]) | set(partitions["gpu"]) | set(partitions["all"])
    assert set(partitions["gpu"]) & set(partitions["half"])  # they overlap


@pytest.mark.parametrize(("shape", "nodes"), [("4-groups-50k", 50_000), ("groups-95", 48_640), ("small-1520", 48_640)])
def test_the_large_points_have_their_node_counts(scale, shape, nodes):
    assert scale.nodes_of(scale.SHAPES[shape]()) == nodes
