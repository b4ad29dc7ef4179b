"""Slurm configuration files as data: comments, continuation lines, ``key=value`` pairs.

Slurm reads keys without regard to case (``killwait`` is ``KillWait``), so keys are compared in
lower case and kept as written for messages. Values are compared as written. A slurm.conf line
that opens a record (``NodeName=``, ``PartitionName=`` ...) describes one thing by its name; a
``NodeName=DEFAULT`` line sets defaults for the lines below it of the same kind.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# Node line keys that, as hostlists, give each node of the line its own value (NodeAddr=10.0.0.[1-8]).
PER_NODE_KEYS = ("nodeaddr", "nodehostname", "bcastaddr")
_PAIR = re.compile(r'\s*([^=\s]+)=("[^"]*"|\S*)|\s*(\S+)')
_RANGE = re.compile(r"^(\d+)-(\d+)$")


@dataclass
class Conf:
    """A parsed file: plain settings and records.

    ``settings``: lower key -> every value it is given, in order; ``spelled``: lower key -> the key
    as first written; ``records``: lower record key ("nodename") -> record name -> {lower key: value}
    (nodes one by one, hostlists expanded)."""

    settings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    spelled: dict[str, str] = field(default_factory=dict)
    records: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)


def logical_lines(text: str) -> list[str]:
    """The lines Slurm reads: a trailing backslash joins the next line, ``#`` starts a comment
    (``\\#`` is a literal ``#``), blank lines dropped."""
    joined = re.sub(r"\\\n", "", text)
    lines = []
    for raw in joined.splitlines():
        line = re.sub(r"(?<!\\)#.*$", "", raw).replace("\\#", "#").strip()
        if line:
            lines.append(line)
    return lines


def pairs(line: str) -> list[tuple[str, str]]:
    """The ``key=value`` pairs of a line (a quoted value keeps its spaces, loses its quotes); a word
    without ``=`` is a key with the value ''."""
    found = []
    for match in _PAIR.finditer(line):
        key, value, bare = match.groups()
        if key is not None:
            found.append((key, value[1:-1] if value.startswith('"') and value.endswith('"') else value))
        elif bare:
            found.append((bare, ""))
    return found


def expand_hostlist(expression: str) -> list[str]:
    """``node[01-03,7],login`` -> node01, node02, node03, node7, login (Slurm's hostlist syntax)."""
    names: list[str] = []
    for item in _split_outside_brackets(expression):
        parts = re.split(r"(\[[^\]]*\])", item)
        choices = [_bracket_choices(part) if part.startswith("[") else [part] for part in parts]
        names += ["".join(combination) for combination in itertools.product(*choices)]
    return names


def _split_outside_brackets(expression: str) -> list[str]:
    items, depth, current = [], 0, ""
    for char in expression:
        depth += (char == "[") - (char == "]")
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    return [item for item in [*items, current] if item]


def _bracket_choices(bracket: str) -> list[str]:
    choices = []
    for piece in bracket[1:-1].split(","):
        span = _RANGE.fullmatch(piece)
        if span is None:
            choices.append(piece)
            continue
        low, high = span.groups()
        choices += [str(number).zfill(len(low)) for number in range(int(low), int(high) + 1)]
    return choices


def parse_conf(text: str, record_keys: Iterable[str] = (), expand: Iterable[str] = ()) -> Conf:
    """``text`` as settings and records. ``record_keys``: the keys that open a record when a line
    starts with them; ``expand``: those whose names are hostlists (NodeName, DownNodes)."""
    openers = {key.lower() for key in record_keys}
    hostlists = {key.lower() for key in expand}
    conf = Conf()
    defaults: dict[str, dict[str, str]] = {}
    for line in logical_lines(text):
        if re.match(r"(?i)include\s", line):
            keyword, target = line.split(None, 1)
            _add_settings(conf, [(keyword, target)])
            continue
        found = pairs(line)
        kind = found[0][0].lower()
        if kind not in openers:
            _add_settings(conf, found)
            continue
        conf.spelled.setdefault(kind, found[0][0])
        attributes = {key.lower(): value for key, value in found[1:]}
        name = found[0][1]
        if name.upper() == "DEFAULT":
            defaults[kind] = {**defaults.get(kind, {}), **attributes}
            continue
        names = expand_hostlist(name) if kind in hostlists else [name]
        own_values = per_node_values(attributes, names)
        for index, one in enumerate(names):
            own = {**attributes, **{key: values[index] for key, values in own_values.items()}}
            conf.records.setdefault(kind, {})[one] = {**defaults.get(kind, {}), **own}
        for key, _value in found[1:]:
            conf.spelled.setdefault(key.lower(), key)
    return conf


def per_node_values(attributes: dict[str, str], names: list[str]) -> dict[str, list[str]]:
    """The per-node keys of a line naming ``names`` whose hostlist has one entry per name: each
    node gets its own entry. Expanded once per line, not once per node (a 10,000-node line)."""
    if len(names) < 2:
        return {}
    found = {key: expand_hostlist(attributes[key]) for key in PER_NODE_KEYS if key in attributes}
    return {key: values for key, values in found.items() if len(values) == len(names)}


def _add_settings(conf: Conf, found: list[tuple[str, str]]) -> None:
    for key, value in found:
        lower = key.lower()
        conf.spelled.setdefault(lower, key)
        conf.settings[lower] = (*conf.settings.get(lower, ()), value)
