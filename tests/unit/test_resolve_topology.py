"""resolve/topology.py: a tree of switches or blocks, with every node on exactly one leaf or block."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, FILE, edit, expected_problems, line_of, problems

TREE = """\
topology:
  plugin: tree
  switches:
    - name: leaf1
      nodes: gpu[1-4]
    - name: leaf2
      nodes: dev[1-2]
    - name: spine
      switches: leaf[1-2]
"""

BLOCK = """\
topology:
  plugin: block
  blocks:
    - name: b1
      nodes: gpu[1-4]
    - name: b2
      nodes: dev[1-2]
  block_sizes: [2, 4]
"""

EITHER_NODES_OR_SWITCHES = "a switch has either nodes (leaf) or switches (parent), not both or neither"


@pytest.mark.parametrize("topology", [pytest.param(TREE, id="tree"), pytest.param(BLOCK, id="block")])
def test_a_valid_topology(topology):
    assert problems(BASE + topology) == []


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        pytest.param(
            TREE + "  blocks:\n    - name: b1\n      nodes: gpu1\n",
            [("blocks:", "topology.blocks", "blocks belong to plugin: block")],
            id="tree_with_blocks",
        ),
        pytest.param(
            "topology:\n  plugin: tree\n",
            [
                ("topology:", "topology", "nodes on no switch/block: dev[1-2],gpu[1-4]"),
                ("topology:", "topology.switches", "a tree topology needs switches"),
            ],
            id="tree_without_switches",
        ),
        pytest.param(
            edit(TREE, "      switches: leaf[1-2]\n", "      switches: leaf[1-2]\n      nodes: gpu1\n"),
            [("name: spine", "topology.switches[2]", EITHER_NODES_OR_SWITCHES)],
            id="switch_with_both_nodes_and_switches",
        ),
        pytest.param(
            edit(TREE, "    - name: spine\n      switches: leaf[1-2]\n", "    - name: spine\n"),
            [("name: spine", "topology.switches[2]", EITHER_NODES_OR_SWITCHES)],
            id="switch_with_neither_nodes_nor_switches",
        ),
        pytest.param(
            edit(TREE, "switches: leaf[1-2]", "switches: leaf[1-3]"),
            [("switches: leaf[1-3]", "topology.switches[2].switches", "switch 'leaf3' is not declared")],
            id="child_switch_not_declared",
        ),
        pytest.param(
            edit(TREE, "nodes: dev[1-2]", "nodes: dev[1-3]"),
            [("nodes: dev[1-3]", "topology.switches[1].nodes", "'dev3' is not a node")],
            id="switch_member_that_is_not_a_node",
        ),
        pytest.param(
            edit(TREE, "nodes: dev[1-2]", "nodes: gpu4"),
            [
                ("topology:", "topology", "nodes on no switch/block: dev[1-2]"),
                ("topology:", "topology", "nodes on more than one switch/block: gpu4"),
            ],
            id="nodes_on_no_switch_and_on_two_switches",
        ),
        pytest.param(
            edit(TREE, "nodes: dev[1-2]", "nodes: dev[1-2],gpu4"),
            [("topology:", "topology", "nodes on more than one switch/block: gpu4")],
            id="every_node_on_a_switch_and_one_on_two",
        ),
        pytest.param(
            BLOCK + "  switches:\n    - name: s1\n      nodes: gpu1\n",
            [("  switches:", "topology.switches", "switches belong to plugin: tree")],
            id="block_with_switches",
        ),
        pytest.param(
            "topology:\n  plugin: block\n",
            [
                ("topology:", "topology", "nodes on no switch/block: dev[1-2],gpu[1-4]"),
                ("topology:", "topology.blocks", "a block topology needs blocks"),
            ],
            id="block_without_blocks",
        ),
        pytest.param(
            edit(BLOCK, "nodes: dev[1-2]", "nodes: dev[1-2],zzz"),
            [("nodes: dev[1-2],zzz", "topology.blocks[1].nodes", "'zzz' is not a node")],
            id="block_member_that_is_not_a_node",
        ),
        pytest.param(
            edit(BLOCK, "nodes: dev[1-2]", "nodes: dev[1-2],gpu1"),
            [("topology:", "topology", "nodes on more than one switch/block: gpu1")],
            id="nodes_in_two_blocks",
        ),
    ],
)
def test_topology_problems(topology, expected):
    text = BASE + topology
    assert problems(text) == expected_problems(text, expected)


def test_switch_declared_twice():
    text = BASE + edit(
        TREE,
        "    - name: leaf2\n      nodes: dev[1-2]\n",
        "    - name: leaf2\n      nodes: dev[1-2]\n    - name: leaf1\n      switches: leaf2\n",
    )
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'switches: leaf2$') - 1}: topology.switches[2].name: switch 'leaf1' is declared twice"
    ]


def test_switch_loop():
    text = BASE + edit(
        TREE,
        "      nodes: dev[1-2]\n",
        "      nodes: dev[1-2]\n    - name: loop1\n      switches: loop2\n    - name: loop2\n      switches: loop1\n",
    )
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'plugin: tree') + 1}: topology.switches: switch loop: loop1 -> loop2 -> loop1"
    ]
