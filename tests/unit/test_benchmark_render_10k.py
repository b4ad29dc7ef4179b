"""benchmarks/render_10k.py builds the cluster it claims to, and touches only its own section."""

from __future__ import annotations

import pytest
from unit_helpers import benchmark_module

from cluster_cli import hostlist
from cluster_cli.loader import load_cluster_text
from cluster_cli.render.slurm_conf import node_lines


@pytest.fixture(scope="module")
def bench():
    with benchmark_module("render_10k") as module:
        yield module


def test_the_benchmark_inventory_is_a_valid_10000_node_cluster(bench):
    cluster = load_cluster_text(bench.inventory_text(), "bench.yaml")
    assert len(cluster.nodes) == 10_000
    assert {node.group.name for node in cluster.nodes} == {"h100", "a100", "l40s", "cpu"}
    assert all(not node.single_host for node in cluster.nodes)
    assert set(cluster.partition_nodes) == {"train", "inference", "cpu"}
    switches = cluster.inventory.topology.switches
    leaves = [switch for switch in switches if switch.nodes]
    assert all(len(hostlist.expand(leaf.nodes)) <= 32 for leaf in leaves)
    assert sum(len(hostlist.expand(leaf.nodes)) for leaf in leaves) == 10_000
    # addresses line up with names, so every group is one NodeName line
    assert len(node_lines(cluster)) == 4
    assert cluster.node("a100-4096").address == "10.2.15.255"


def test_write_section_replaces_only_its_own_section(bench, tmp_path, monkeypatch):
    doc = tmp_path / "benchmarks.md"
    monkeypatch.setattr(bench, "DOC", doc)
    bench.write_section(f"{bench.HEADING}\n\nfirst\n")
    assert doc.read_text() == bench.INTRO + f"\n{bench.HEADING}\n\nfirst\n"
    doc.write_text(doc.read_text() + "\n## Other: something\n\nkeep me\n")
    bench.write_section(f"{bench.HEADING}\n\nsecond\n")
    assert doc.read_text() == bench.INTRO + f"\n{bench.HEADING}\n\nsecond\n\n## Other: something\n\nkeep me\n"
