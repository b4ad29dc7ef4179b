"""Partitions: the nodes of each, from group names and hostlists; every node in one at least."""

from __future__ import annotations

from collections import defaultdict

from cluster_cli import hostlist
from cluster_cli.errors import Location
from cluster_cli.model import Partition
from cluster_cli.resolve.nodes import SlurmNode
from cluster_cli.resolve.problems import Problems, expand


def resolve_partitions(
    partitions: list[Partition], nodes: list[SlurmNode], problems: Problems
) -> dict[str, list[str]]:
    """Each partition's node names, in the order given, without repeats."""
    by_group: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        by_group[node.group.name].append(node.name)
    known = {node.name for node in nodes}
    defaults = [partition.name for partition in partitions if partition.default]
    if len(defaults) > 1:
        problems.add(("partitions",), f"only one partition can be the default, not {', '.join(defaults)}")
    result: dict[str, list[str]] = {}
    used: set[str] = set()
    for index, partition in enumerate(partitions):
        where: Location = ("partitions", index)
        if partition.name in result:
            problems.add(where + ("name",), f"partition '{partition.name}' is declared twice")
        members = _members(where, partition, by_group, known, problems)
        result[partition.name] = list(dict.fromkeys(members))
        used.update(members)
    unplaced = [node.name for node in nodes if node.name not in used] if len(used) != len(known) else []
    if unplaced:
        problems.add(("partitions",), f"nodes in no partition: {hostlist.compress(unplaced)}")
    return result


def _members(
    where: Location, partition: Partition, by_group: dict[str, list[str]], known: set[str], problems: Problems
) -> list[str]:
    """The nodes a partition lists: a group name stands for its nodes, anything else is a hostlist."""
    members: list[str] = []
    for item_index, item in enumerate(partition.nodes):
        if item in by_group:
            members.extend(by_group[item])
            continue
        expanded = expand(problems, where + ("nodes", item_index), item)
        missing = [name for name in expanded if name not in known]
        if missing:
            problems.add(where + ("nodes", item_index), f"'{missing[0]}' is neither a node group nor a node")
        members.extend(name for name in expanded if name in known)
    return members
