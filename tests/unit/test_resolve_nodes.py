"""resolve/nodes.py: node groups expanded into nodes, their names, CPUs, hosts, ports and addresses."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, FILE, edit, edit_all, expected_problems, line_of, problems


def test_node_group_declared_twice():
    text = edit(BASE, "  - name: dev\n    nodes: dev[1-2]\n", "  - name: gpu\n    nodes: dev[1-2]\n")
    text = edit(text, "nodes: [gpu, dev]", "nodes: [gpu]")
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'nodes: dev[1-2]') - 1}: node_groups[1].name: node group 'gpu' is declared twice"
    ]


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        pytest.param(
            [("nodes: dev[1-2]", "nodes: dev[1-2]-")],
            [
                ("nodes: dev[1-2]-", "node_groups[1].nodes", "node name 'dev1-' is not a valid host name"),
                ("nodes: dev[1-2]-", "node_groups[1].nodes", "node name 'dev2-' is not a valid host name"),
            ],
            id="invalid_node_names",
        ),
        pytest.param(
            [("nodes: dev[1-2]", "nodes: gpu4,dev2")],
            [("nodes: gpu4,dev2", "node_groups[1].nodes", "node 'gpu4' is also in node_groups[0]")],
            id="node_in_two_groups",
        ),
        pytest.param(
            [
                ("nodes: dev[1-2]", "nodes: dev[1-2],dev1"),
                ("devices: /dev/fake[0-1]", "devices: /dev/fake[0-2]"),
            ],
            [("nodes: dev[1-2],dev1", "node_groups[1].nodes", "node 'dev1' is also in node_groups[1]")],
            id="node_twice_in_one_group",
        ),
        pytest.param(
            [("nodes: dev[1-2]", "nodes: dev1,gpu")],
            [("node_groups:", "node_groups", "'gpu' is both a node group and a node name")],
            id="group_name_that_is_also_a_node_name",
        ),
        pytest.param(
            [("    cores_per_socket: 8\n", "    cores_per_socket: 8\n    cpus: 17\n")],
            [("cpus: 17", "node_groups[0].cpus", "17 CPUs but sockets x cores x threads is only 16")],
            id="more_cpus_than_the_topology_gives",
        ),
    ],
)
def test_node_group_problems(edits, expected):
    text = edit_all(BASE, edits)
    assert problems(text) == expected_problems(text, expected)


# -- single-host and multi-host groups ---------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "    host: box\n",
            "    host: elsewhere\n",
            [
                # box lost its only role
                (
                    "  - name: box",
                    "hosts[1].name",
                    "host 'box' has no role (controller, database, login, monitoring, nodes)",
                ),
                ("host: elsewhere", "node_groups[1].host", "host 'elsewhere' is not declared under hosts"),
            ],
            id="single_host_group_on_an_undeclared_host",
        ),
        pytest.param(
            "    base_port: 17001\n",
            "",
            [
                (
                    "  - name: dev",
                    "node_groups[1].base_port",
                    "single-host groups need base_port (one slurmd port per node)",
                )
            ],
            id="single_host_group_needs_base_port",
        ),
        pytest.param(
            "base_port: 17001",
            "base_port: 65535",
            [("base_port: 65535", "node_groups[1].base_port", "2 nodes from port 65535 pass 65535")],
            id="single_host_ports_may_not_pass_65535",
        ),
        pytest.param(
            "    base_port: 17001\n",
            "    base_port: 17001\n    addresses: 10.9.9.[1-2]\n",
            [
                (
                    "addresses: 10.9.9",
                    "node_groups[1].addresses",
                    "single-host nodes share their host's address; remove addresses",
                )
            ],
            id="single_host_group_takes_no_addresses",
        ),
        pytest.param(
            "    addresses: 10.0.1.[1-4]\n",
            "    addresses: 10.0.1.[1-4]\n    base_port: 18000\n",
            [
                (
                    "base_port: 18000",
                    "node_groups[0].base_port",
                    "base_port is only for single-host groups (set host)",
                )
            ],
            id="base_port_only_for_single_host_groups",
        ),
        pytest.param(
            "addresses: 10.0.1.[1-4]",
            "addresses: 10.0.1.[1-3]",
            [("addresses: 10.0.1.[1-3]", "node_groups[0].addresses", "3 addresses for 4 nodes")],
            id="address_count_must_match_node_count",
        ),
    ],
)
def test_single_and_multi_host_group_problems(old, new, expected):
    text = edit(BASE, old, new)
    assert problems(text) == expected_problems(text, expected)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        pytest.param(
            "    cores_per_socket: 8\n",
            "    cores_per_socket: 8\n    cpus: 16\n",
            id="cpus_as_many_as_the_topology_gives",
        ),
        pytest.param("base_port: 17001", "base_port: 65534", id="single_host_ports_up_to_65535"),
    ],
)
def test_node_groups_at_their_limits_are_valid(old, new):
    assert problems(edit(BASE, old, new)) == []
