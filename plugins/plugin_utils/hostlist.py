"""Slurm hostlist expressions: ``gpu[001-128]``, ``rack[1-2]-n[1-4]``, ``a1,b[2-3]``.

Expansion follows Slurm's rules: a range is zero-padded to the width of its lower bound as
written (``[001-128]`` gives ``001``..``128``, ``[9-10]`` gives ``9``, ``10``), several bracket
groups in one name form a cartesian product, and a comma outside brackets separates names.
Compression groups names on their last run of digits and emits them sorted, so the output is
stable whatever order the names came in.

Standard library only. Its home is the collection's plugins/plugin_utils/ (the roles' filter
reasons_by_hosts imports ``compress`` from there, as
ansible_collections.cluster_cli.slurm.plugins.plugin_utils.hostlist); cluster_cli/hostlist.py is
a link to it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from functools import lru_cache
from itertools import groupby, repeat
from operator import itemgetter

MAX_EXPANSION = 1_000_000


class HostlistError(ValueError):
    """A hostlist expression that cannot be parsed or is too large."""


def _split_top_level(expression: str) -> list[str]:
    if "," not in expression:  # one name, with at most one bracket group in order: nothing to split or refuse
        opening, closing = expression.count("["), expression.count("]")
        if opening == closing == 0 or (opening == closing == 1 and expression.index("[") < expression.index("]")):
            return [expression]
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in expression:
        if char == "[":
            if depth:
                raise HostlistError(f"nested '[' in {expression!r}")
            depth = 1
        elif char == "]":
            if not depth:
                raise HostlistError(f"unmatched ']' in {expression!r}")
            depth = 0
        if char == "," and not depth:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise HostlistError(f"unclosed '[' in {expression!r}")
    parts.append("".join(current))
    return parts


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _expand_bracket(body: str, expression: str, head: str = "", tail: str = "") -> list[str]:
    """The numbers a bracket group stands for, each written between ``head`` and ``tail``."""
    values: list[str] = []
    for item in body.split(","):
        match = _RANGE.fullmatch(item.strip())
        if not match:
            raise HostlistError(f"bad range {item!r} in {expression!r}")
        low_text, high_text = match.group(1), match.group(2)
        low = int(low_text)
        high = int(high_text) if high_text is not None else low
        if high < low:
            raise HostlistError(f"range {item!r} goes backwards in {expression!r}")
        if high - low + 1 > MAX_EXPANSION:
            raise HostlistError(f"range {item!r} in {expression!r} has more than {MAX_EXPANSION} names")
        if len(values) + high - low + 1 > MAX_EXPANSION:
            # counted before the names are built: `[1-999999,1-999999,...]` must not fill memory
            raise HostlistError(f"{expression!r} expands to more than {MAX_EXPANSION} names")
        width = len(low_text)  # each number zero-padded to the width of the first
        values += [head + str(number).zfill(width) + tail for number in range(low, high + 1)]
    return values


_PIECE = re.compile(r"\[([^\]]*)\]")


def _expand_name(pattern: str, expression: str) -> list[str]:
    if pattern.count("[") == 1:  # most names (a group's, its addresses): each made in one step
        match = _PIECE.search(pattern)
        if match is not None:
            return _expand_bracket(match.group(1), expression, pattern[: match.start()], pattern[match.end() :])
    names = [""]
    position = 0
    for match in _PIECE.finditer(pattern):
        literal = pattern[position : match.start()]
        choices = _expand_bracket(match.group(1), expression)
        if len(names) * len(choices) > MAX_EXPANSION:
            raise HostlistError(f"{expression!r} expands to more than {MAX_EXPANSION} names")
        names = [name + literal + choice for name in names for choice in choices]
        position = match.end()
    tail = pattern[position:]
    return [name + tail for name in names]


# Expressions expanded before, with their names: validation, resolve and render expand the same
# ones (a group's nodes and addresses, a switch's nodes). At most _expanded_room names in all.
_EXPANDED: dict[str, list[str]] = {}
_expanded_room = 200_000


def expand(expression: str) -> list[str]:
    """Expand a hostlist expression into names, in the order written."""
    if not isinstance(expression, str):
        raise HostlistError(f"a hostlist must be a string, not {type(expression).__name__}")
    global _expanded_room
    names = _EXPANDED.get(expression)
    if names is None:
        names = _expand(expression)
        if len(names) <= _expanded_room:
            _EXPANDED[expression] = names
            _expanded_room -= len(names)
    return list(names)


def _expand(expression: str) -> list[str]:
    expression = expression.strip()
    if not expression:
        raise HostlistError("empty hostlist")
    names: list[str] = []
    for part in _split_top_level(expression):
        part = part.strip()
        if not part:
            raise HostlistError(f"empty name in {expression!r}")
        if part.split() != [part]:  # str.split() cuts at the very characters str.isspace() names
            raise HostlistError(f"white space inside name {part!r}")
        names.extend(_expand_name(part, expression))
        if len(names) > MAX_EXPANSION:
            raise HostlistError(f"{expression!r} expands to more than {MAX_EXPANSION} names")
    return names


_LAST_NUMBER = re.compile(r"^(.*?)(\d+)(\D*)$")


def _format_run(first_digits: str, count: int) -> str:
    width = len(first_digits)
    start = int(first_digits)
    if count == 1:
        return first_digits
    return f"{first_digits}-{str(start + count - 1).zfill(width)}"


_CHUNKS = re.compile(r"\d+|\D+")


@lru_cache(maxsize=4096)  # a prefix is sorted again in every hostlist its names are in
def _natural(text: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key that orders digits by value: rack2 before rack10, 10.1.2. before 10.1.10."""
    return tuple((0, int(chunk), chunk) if chunk.isdigit() else (1, 0, chunk) for chunk in _CHUNKS.findall(text))


def _single_run(digit_strings: list[str]) -> tuple[str, int, int, int] | None:
    """The one run (first digits, first value, width, count) that digit strings make when their
    distinct values leave no gap and they are all of one width (a group's names) or all written
    without leading zeros (a subnet's addresses, 0-255), found without a sort of tuples; None otherwise."""
    distinct = set(digit_strings)
    listed = "," + ",".join(distinct) + ","
    if not listed.isascii():
        return None  # other scripts' digits: their text does not sort by value
    if len(set(map(len, distinct))) == 1:
        first, last = min(distinct), max(distinct)  # one width: the order of the text is that of the value
        start, end = int(first), int(last)
    elif listed.count(",0") == listed.count(",0,"):  # no number but 0 starts with a 0
        # a run goes on into a wider number written without a leading zero (9, 10), as compress's does
        values = list(map(int, distinct))
        start, end = min(values), max(values)
        first = str(start)
    else:
        return None
    if end - start + 1 != len(distinct):
        return None
    return first, start, len(first), len(distinct)


_DIGITS = "0123456789"


def _numbered(names: list[str]) -> tuple[dict[tuple[str, str], list[str]], set[str]]:
    """The names' last numbers by what is around them (prefix, suffix), and the names without one."""
    if names and "".join(names).isascii():
        # what _LAST_NUMBER finds, without the regular expression and, where every name ends in a
        # digit (a group's names, addresses), in runs of one prefix: most of the time of compress
        prefixes = list(map(str.rstrip, names, repeat(_DIGITS)))
        if all(map(str.__ne__, prefixes, names)):
            if prefixes.count(prefixes[0]) == len(prefixes):  # one prefix: a group's names, a subnet
                start = len(prefixes[0])
                return {(prefixes[0], ""): [name[start:] for name in names]}, set()
            runs: dict[tuple[str, str], list[str]] = {}
            for prefix, run in groupby(zip(prefixes, names), key=itemgetter(0)):
                start = len(prefix)
                runs.setdefault((prefix, ""), []).extend([name[start:] for _number, name in run])
            return runs, set()
    numbered: dict[tuple[str, str], list[str]] = defaultdict(list)
    plain: set[str] = set()
    for name in names:
        if name[-1:].isdigit() and name.isascii():
            prefix = name.rstrip(_DIGITS)
            numbered[(prefix, "")].append(name[len(prefix) :])
            continue
        match = _LAST_NUMBER.fullmatch(name)
        if match is None:
            plain.add(name)
        else:
            numbered[(match.group(1), match.group(3))].append(match.group(2))
    return numbered, plain


def compress(names: Iterable[str]) -> str:
    """Compress names into the shortest sorted hostlist expression this grouping allows.

    Pieces come in natural order (numbers in prefixes compared by value), so addresses such as
    10.1.0.[0-255],10.1.1.[0-255],...,10.1.10.[0-255] expand in the order they were written.
    """
    return joined(compressed_pieces(names))


#: compress's pieces of some names by what each is of: a (prefix, suffix) of numbered names, or a
#: name without a number (a str, never equal to a tuple); each piece is (its sort key, its text)
Pieces = dict[object, tuple[tuple[object, ...], str]]


def join_pieces(parts: Iterable[Pieces]) -> str | None:
    """``compress`` of the names of several parts, from each part's ``compressed_pieces`` (a
    partition's groups, compressed once for their NodeName lines): the text depends only on the
    set of names, and names of different prefixes never share a piece. None where two parts have
    a piece of one prefix and suffix (their runs may merge): compress their names instead."""
    merged: Pieces = {}
    for part in parts:
        if not merged.keys().isdisjoint(part):
            return None
        merged.update(part)
    return joined(merged)


def joined(pieces: Pieces) -> str:
    """The hostlist of some ``compressed_pieces``: ``compress`` of their names."""
    return ",".join(text for _order, text in sorted(pieces.values(), key=itemgetter(0)))


def compressed_pieces(names: Iterable[str]) -> Pieces:
    """The pieces ``compress`` joins (see Pieces)."""
    numbered, plain = _numbered(list(names))
    pieces: Pieces = {name: ((_natural(name), (), -1), name) for name in plain}
    for (prefix, suffix), digit_strings in numbered.items():
        runs: list[tuple[str, int, int, int]] = []  # first digits, first value, width, count
        single = _single_run(digit_strings)
        if single is not None:
            runs.append(single)
            values = [(single[1], single[2], single[0])]
        else:
            # by value, then the shorter spelling first: 1 before 01
            values = sorted({(int(digits), len(digits), digits) for digits in digit_strings})
        for number, length, digits in values if single is None else ():
            if runs:
                first, start, width, count = runs[-1]
                # the run goes on with the next number, written at the run's width
                if number == start + count and (length == width or (length > width and digits[0] != "0")):
                    runs[-1] = (first, start, width, count + 1)
                    continue
            runs.append((digits, number, length, 1))
        if len(runs) == 1 and runs[0][3] == 1:
            text = f"{prefix}{runs[0][0]}{suffix}"
        else:
            text = f"{prefix}[{','.join(_format_run(first, count) for first, _start, _width, count in runs)}]{suffix}"
        pieces[(prefix, suffix)] = ((_natural(prefix), _natural(suffix), values[0][0]), text)
    return pieces
