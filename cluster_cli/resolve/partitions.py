"""Partitions: the nodes of each, from group names and hostlists; every node in one at least."""

from __future__ import annotations

from typing import NamedTuple

from cluster_cli import hostlist
from cluster_cli.errors import Location
from cluster_cli.model import NodeGroup, Partition
from cluster_cli.resolve.nodes import SlurmNode
from cluster_cli.resolve.problems import Problems, expand


class PartitionNodes(NamedTuple):
    """A partition's nodes as its items give them: a group name stands for the group's nodes,
    anything else is a hostlist of nodes."""

    names: list[str]  # each node once, in the order given
    groups: list[NodeGroup]  # the groups of its nodes, each once, in the order of their first node
    named_groups: list[NodeGroup]  # the groups it names, in the order named
    listed: list[str]  # the nodes its hostlists name, in the order given


def resolve_partitions(
    partitions: list[Partition], nodes: list[SlurmNode], problems: Problems
) -> dict[str, PartitionNodes]:
    """Each partition's nodes, by partition name in inventory order."""
    by_group: dict[str, tuple[NodeGroup, list[str]]] = {}  # group name -> the group, its node names
    for node in nodes:
        entry = by_group.get(node.group.name)
        if entry is None:
            entry = by_group[node.group.name] = (node.group, [])
        entry[1].append(node.name)
    known = {node.name: node for node in nodes}
    defaults = [partition.name for partition in partitions if partition.default]
    if len(defaults) > 1:
        problems.add(("partitions",), f"only one partition can be the default, not {', '.join(defaults)}")
    result: dict[str, PartitionNodes] = {}
    used: set[str] = set()
    for index, partition in enumerate(partitions):
        where: Location = ("partitions", index)
        if partition.name in result:
            problems.add(where + ("name",), f"partition '{partition.name}' is declared twice")
        result[partition.name] = members = _members(where, partition, by_group, known, problems)
        used.update(members.names)
    unplaced = [node.name for node in nodes if node.name not in used] if len(used) != len(known) else []
    if unplaced:
        problems.add(("partitions",), f"nodes in no partition: {hostlist.compress(unplaced)}")
    return result


def _members(
    where: Location,
    partition: Partition,
    by_group: dict[str, tuple[NodeGroup, list[str]]],
    known: dict[str, SlurmNode],
    problems: Problems,
) -> PartitionNodes:
    names: list[str] = []
    groups: dict[int, NodeGroup] = {}
    named_groups: list[NodeGroup] = []
    listed: list[str] = []
    for item_index, item in enumerate(partition.nodes):
        if item in by_group:
            group, group_names = by_group[item]
            names.extend(group_names)
            groups.setdefault(id(group), group)
            named_groups.append(group)
            continue
        expanded = expand(problems, where + ("nodes", item_index), item)
        missing = [name for name in expanded if name not in known]
        if missing:
            problems.add(where + ("nodes", item_index), f"'{missing[0]}' is neither a node group nor a node")
        found = [name for name in expanded if name in known]
        for name in found:
            group = known[name].group
            groups.setdefault(id(group), group)
        names.extend(found)
        listed.extend(found)
    return PartitionNodes(list(dict.fromkeys(names)), list(groups.values()), named_groups, listed)
