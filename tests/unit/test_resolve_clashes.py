"""resolve/clashes.py: two daemons of one host on one port, two nodes of one host on one GPU device file."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, edit_all, expected_problems, problems


def second_group_on_box(base_port: int, gpus: str = "") -> list[tuple[str, str]]:
    """Edits that add a second single-host group on box, devb (one node, devb1), to BASE and its partition."""
    group = (
        f"  - name: devb\n    nodes: devb1\n    host: box\n    base_port: {base_port}\n"
        f"    cores_per_socket: 1\n    real_memory_mb: 100\n{gpus}"
    )
    return [("partitions:\n", group + "partitions:\n"), ("nodes: [gpu, dev]", "nodes: [gpu, dev, devb]")]


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        pytest.param(
            [("  host: head\nlogin", "  host: head\n  port: 3306\nlogin")],
            [
                (
                    "port: 3306",
                    "accounting.port",
                    "port 3306 on host 'head' is used by both slurmdbd and MariaDB",
                )
            ],
            id="slurmdbd_on_the_mariadb_port",
        ),
        pytest.param(
            [("  host: head\nlogin", "  host: head\n  port: 6817\nlogin")],
            [
                (
                    "port: 6817",
                    "accounting.port",
                    "port 6817 on host 'head' is used by both slurmctld and slurmdbd",
                )
            ],
            id="slurmctld_and_slurmdbd_on_one_port",
        ),
        pytest.param(
            [("  primary: head\n", "  primary: box\n  port: 17002\n")],
            [
                (
                    "base_port: 17001",
                    "node_groups[1].base_port",
                    "port 17002 on host 'box' is used by both slurmctld and slurmd of dev2",
                )
            ],
            id="slurmctld_and_a_single_host_slurmd_on_one_port",
        ),
        pytest.param(
            [("  primary: head\n", "  primary: gpu1\n  port: 6818\n")],
            [
                (
                    "  - name: gpu$",
                    "node_groups[0]",
                    "port 6818 on host 'gpu1' is used by both slurmctld and slurmd of gpu1",
                )
            ],
            id="controller_on_a_compute_node_with_the_slurmd_port",
        ),
        pytest.param(
            second_group_on_box(17002),
            [
                (
                    "base_port: 17002",
                    "node_groups[2].base_port",
                    "port 17002 on host 'box' is used by both slurmd of dev2 and slurmd of devb1",
                )
            ],
            id="two_single_host_groups_with_overlapping_ports",
        ),
        pytest.param(
            # both claim /dev/fake0
            second_group_on_box(17010, gpus="    gpus:\n      count: 1\n      devices: /dev/fake0\n"),
            [("node_groups:", "node_groups", "device /dev/fake0 on host 'box' belongs to two nodes")],
            id="one_device_for_two_nodes_of_one_host",
        ),
    ],
)
def test_daemons_of_one_host_that_clash(edits, expected):
    text = edit_all(BASE, edits)
    assert problems(text) == expected_problems(text, expected)
