"""The shipped inventories are valid and resolve to the clusters their comments describe."""

from __future__ import annotations

import pytest
from unit_helpers import REPO, SHIPPED_INVENTORIES

from cluster_cli.loader import load_cluster


def test_every_inventory_in_the_repository_is_covered():
    found = sorted(path for path in (REPO / "inventories").rglob("*.y*ml"))
    assert found == sorted(SHIPPED_INVENTORIES.values())


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_shipped_inventory_is_valid(name):
    cluster = load_cluster(SHIPPED_INVENTORIES[name])
    assert cluster.nodes and cluster.partition_nodes


def test_local_is_three_slurmd_on_this_host():
    cluster = load_cluster(SHIPPED_INVENTORIES["local"])
    assert [(node.name, node.host, node.port, node.gpu_devices) for node in cluster.nodes] == [
        ("node1", "localhost", 17001, ("/dev/fake-gpu/nvidia0",)),
        ("node2", "localhost", 17002, ("/dev/fake-gpu/nvidia1",)),
        ("node3", "localhost", 17003, ("/dev/fake-gpu/nvidia2",)),
    ]
    (host,) = cluster.hosts.values()
    assert host.connection == "local"
    assert host.roles == {"controller", "database", "login", "compute", "monitoring"}
    assert cluster.partition_nodes == {"debug": ["node1", "node2", "node3"]}


def test_minimal_is_one_head_and_four_gpu_nodes():
    cluster = load_cluster(SHIPPED_INVENTORIES["minimal"])
    assert [(node.name, node.address, node.port) for node in cluster.nodes] == [
        ("gpu01", "10.0.0.21", None),
        ("gpu02", "10.0.0.22", None),
        ("gpu03", "10.0.0.23", None),
        ("gpu04", "10.0.0.24", None),
    ]
    assert cluster.node("gpu03").gpu_devices == (
        "/dev/nvidia0",
        "/dev/nvidia1",
        "/dev/nvidia2",
        "/dev/nvidia3",
    )
    assert cluster.hosts["head"].roles == {"controller", "database", "login"}
    assert cluster.hosts["head"].address == "10.0.0.10"


def test_atlas_has_ha_controllers_and_three_groups():
    cluster = load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])
    assert len(cluster.nodes) == 32 + 16 + 8
    assert cluster.node("h100-017").address == "10.10.1.17"
    assert cluster.node("h100-017").gpu_devices == ()  # NVML finds them
    assert cluster.node("a100-016").gpu_devices == tuple(f"/dev/nvidia{i}" for i in range(8))
    assert cluster.hosts["ctl1"].roles == cluster.hosts["ctl2"].roles == {"controller"}
    assert cluster.hosts["db1"].roles == {"database", "monitoring"}
    assert cluster.partition_nodes["debug"] == ["h100-001", "h100-002", "a100-001", "a100-002"]
    assert len(cluster.hosts) == 4 + 56


def test_a_node_is_found_by_its_name_and_only_a_node_s_name_is_found():
    cluster = load_cluster(SHIPPED_INVENTORIES["local"])
    assert [cluster.node(node.name) for node in cluster.nodes] == cluster.nodes
    with pytest.raises(KeyError):
        cluster.node("localhost")
