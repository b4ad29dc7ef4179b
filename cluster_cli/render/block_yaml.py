"""Block-style YAML, byte for byte what ``yaml.safe_dump(data, sort_keys=False)`` writes, fast.

PyYAML's pure-Python representer and emitter take ~9 s (~4 s with libyaml) for the Ansible
inventory of a 10,000-node cluster: ten thousand near-identical host entries of short names,
addresses and numbers. This writer emits the same text directly. Scalars PyYAML would write
plain (a conservative set, checked with PyYAML's own resolver) are written as they are; any
other scalar is formatted by PyYAML itself in a one-entry document of the same nesting, so
quoting and line folding come out the same (memoized: repeated values cost one call). Shapes
this writer does not handle (a list directly inside a list, odd keys) fall back to safe_dump for
the whole document. A unit test compares the two on random documents.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import yaml

_PLAIN = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./+-]*\Z")
_RESOLVER = yaml.resolver.Resolver()
_STR_TAG = "tag:yaml.org,2002:str"


class _Unsupported(Exception):
    """A shape or key this writer leaves to PyYAML."""


@functools.lru_cache(maxsize=65536)
def _plain(text: str) -> bool:
    """True when PyYAML writes ``text`` as a plain scalar that reads back as this string."""
    return bool(_PLAIN.match(text)) and _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == _STR_TAG


_PLAIN_KEYS: set[str] = set()


def _key(key: Any) -> str:
    if key in _PLAIN_KEYS:
        return key  # type: ignore[no-any-return]
    if isinstance(key, str) and len(key) < 128 and _plain(key):  # longer keys PyYAML writes as '? key'
        if len(_PLAIN_KEYS) < 65536:
            _PLAIN_KEYS.add(key)
        return key
    raise _Unsupported


def _scalar_by_pyyaml(path: tuple[str, ...], key: str | None, value: Any) -> str:
    """PyYAML's text for ``value`` at this place, first line without its key, continuation lines whole.

    ``path`` is the kinds of the containers from the root ('map' or 'seq'); the same nesting and
    key give the same columns, so PyYAML quotes and folds the value exactly as in the document.
    """
    node: Any = {key: value} if key is not None else [value]
    for kind in reversed(path[:-1]):
        node = {"k": node} if kind == "map" else [node]
    text = yaml.safe_dump(node, sort_keys=False, default_flow_style=False)
    lines = text.split("\n")
    depth = path[:-1].count("map")  # wrapper lines before the value's (a list item shares its line)
    own = lines[depth:]
    first = own[0]
    prefix_end = first.index(f"{key}:") + len(key) + 1 if key is not None else first.index("- ") + 1
    return first[prefix_end:].lstrip(" ") + ("\n" + "\n".join(own[1:]) if len(own) > 1 else "")


# Strings repeat (the same ssh arguments on every host): format each once. Only strings: 0.0 and
# -0.0 are equal keys to a cache but not the same text.
_string_by_pyyaml = functools.lru_cache(maxsize=4096)(_scalar_by_pyyaml)


def _scalar(path: tuple[str, ...], key: str | None, value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value if _plain(value) else _string_by_pyyaml(path, key, value).rstrip("\n")
    return _scalar_by_pyyaml(path, key, value).rstrip("\n")


def _mapping(
    data: dict[Any, Any], indent: int, path: tuple[str, ...], out: list[str], first_prefix: str | None
) -> None:
    pad = " " * indent
    here = path + ("map",)
    lead = pad if first_prefix is None else first_prefix  # a list item's first key follows its "- "
    for raw_key, value in data.items():
        key = _key(raw_key)
        if isinstance(value, str):
            out.append(f"{lead}{key}: {value if _plain(value) else _scalar(here, key, value)}")
        elif isinstance(value, dict):
            if not value:
                out.append(f"{lead}{key}: {{}}")
            else:
                out.append(f"{lead}{key}:")
                _mapping(value, indent + 2, here, out, None)
        elif isinstance(value, list):
            if not value:
                out.append(f"{lead}{key}: []")
            else:
                out.append(f"{lead}{key}:")
                _sequence(value, indent, here, out)
        else:
            out.append(f"{lead}{key}: {_scalar(here, key, value)}")
        lead = pad


def _sequence(data: list[Any], indent: int, path: tuple[str, ...], out: list[str]) -> None:
    pad = " " * indent
    here = path + ("seq",)
    for item in data:
        if isinstance(item, dict) and item:
            _mapping(item, indent + 2, here, out, f"{pad}- ")
        elif isinstance(item, (dict, list)):
            raise _Unsupported  # empty containers and lists in lists: left to PyYAML
        else:
            out.append(f"{pad}- {_scalar(here, None, item)}")


def dump(data: dict[Any, Any]) -> str:
    """``yaml.safe_dump(data, sort_keys=False, default_flow_style=False)`` for a mapping, faster."""
    if not isinstance(data, dict) or not data:
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    out: list[str] = []
    try:
        _mapping(data, 0, (), out, None)
    except _Unsupported:
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    return "\n".join(out) + "\n"
