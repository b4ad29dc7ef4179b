"""The fabric (topology.conf): switches of a tree or blocks, each node on exactly one leaf or block."""

from __future__ import annotations

from collections import Counter

from cluster_cli import hostlist
from cluster_cli.errors import Location
from cluster_cli.model import Topology
from cluster_cli.resolve.nodes import SlurmNode
from cluster_cli.resolve.problems import Problems, expand


def check_topology(topology: Topology | None, nodes: list[SlurmNode], problems: Problems) -> None:
    if topology is None:
        return
    known = [node.name for node in nodes]
    covered: Counter[str] = Counter()  # node name -> how many leaf switches or blocks have it
    if topology.plugin == "tree":
        _check_tree(topology, set(known), covered, problems)
    else:
        _check_blocks(topology, set(known), covered, problems)
    if len(covered) == len(known) and max(covered.values(), default=1) == 1:
        return  # each node on one switch or block (covered holds known names only)
    missing = [name for name in known if covered[name] == 0]
    twice = [name for name in known if covered[name] > 1]
    if missing:
        problems.add(("topology",), f"nodes on no switch/block: {hostlist.compress(missing)}")
    if twice:
        problems.add(("topology",), f"nodes on more than one switch/block: {hostlist.compress(twice)}")


def _check_tree(topology: Topology, known: set[str], covered: Counter[str], problems: Problems) -> None:
    if topology.blocks or topology.block_sizes:
        problems.add(("topology", "blocks"), "blocks belong to plugin: block")
    if not topology.switches:
        problems.add(("topology", "switches"), "a tree topology needs switches")
    names = [switch.name for switch in topology.switches]
    children: dict[str, list[str]] = {}
    for index, switch in enumerate(topology.switches):
        where: Location = ("topology", "switches", index)
        if names.count(switch.name) > 1 and names.index(switch.name) != index:
            problems.add(where + ("name",), f"switch '{switch.name}' is declared twice")
        if (switch.nodes is None) == (switch.switches is None):
            problems.add(where, "a switch has either nodes (leaf) or switches (parent), not both or neither")
            continue
        if switch.nodes is not None:
            _count_members(where + ("nodes",), switch.nodes, known, covered, problems)
        else:
            kids = expand(problems, where + ("switches",), str(switch.switches))
            for kid in kids:
                if kid not in names:
                    problems.add(where + ("switches",), f"switch '{kid}' is not declared")
            children[switch.name] = kids
    _check_cycles(children, problems)


def _check_blocks(topology: Topology, known: set[str], covered: Counter[str], problems: Problems) -> None:
    if topology.switches:
        problems.add(("topology", "switches"), "switches belong to plugin: tree")
    if not topology.blocks:
        problems.add(("topology", "blocks"), "a block topology needs blocks")
    for index, block in enumerate(topology.blocks):
        _count_members(("topology", "blocks", index, "nodes"), block.nodes, known, covered, problems)


def _count_members(
    location: Location, expression: str, known: set[str], covered: Counter[str], problems: Problems
) -> None:
    names = expand(problems, location, expression)
    if known.issuperset(names):
        covered.update(names)
        return
    for name in names:
        if name not in known:
            problems.add(location, f"'{name}' is not a node")
            return
        covered[name] += 1


def _check_cycles(children: dict[str, list[str]], problems: Problems) -> None:
    """Reports the first switch loop found (a switch that is its own ancestor)."""
    state: dict[str, int] = {}  # 1: on the path being walked, 2: done

    def visit(name: str, trail: list[str]) -> bool:
        if state.get(name) == 1:
            problems.add(("topology", "switches"), f"switch loop: {' -> '.join(trail + [name])}")
            return False
        if state.get(name) == 2:
            return True
        state[name] = 1
        ok = all(visit(kid, trail + [name]) for kid in children.get(name, []))
        state[name] = 2
        return ok

    for name in children:
        if not visit(name, []):
            return
