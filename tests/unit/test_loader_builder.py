"""The loader's one-walk builder (_build_plain) against SafeConstructor and the checks it stands in for.

On libyaml's nodes of a document without an anchor, _build_plain builds the data and refuses deep
nesting and duplicate keys in one walk; whatever else it meets it leaves to the checked path. Its
data must be SafeConstructor's, type for type (True is not 1, 1 is not 1.0), and what it leaves must
end exactly as before: the same data, the same problem at the same line, or the same exception.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest
import yaml
from unit_helpers import BASE, FILE, SHIPPED_INVENTORIES, benchmark_module, edit, problem, problems

from cluster_cli import loader
from cluster_cli.errors import InventoryError
from cluster_cli.loader import MAX_NESTING, _build_plain, _compose_checked, _construct_checked, _Unbuilt

pytestmark = pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML without libyaml")

FAST = getattr(yaml, "CSafeLoader", None)


def same(built: Any, expected: Any) -> bool:
    """Equal, and of the same type all the way down (dict keys and their order included); NaN is NaN."""
    if type(built) is not type(expected):
        return False
    if isinstance(expected, dict):
        return len(built) == len(expected) and all(
            same(key, other_key) and same(built[key], expected[other_key])
            for key, other_key in zip(built, expected)
        )
    if isinstance(expected, (list, tuple)):
        return len(built) == len(expected) and all(map(same, built, expected))
    if isinstance(expected, float) and math.isnan(expected):
        return math.isnan(built)
    if isinstance(expected, datetime.datetime):
        return built == expected and built.utcoffset() == expected.utcoffset()
    return bool(built == expected)


def test_same_is_type_strict():
    assert same({"a": [1, 2.5, None]}, {"a": [1, 2.5, None]})
    assert same(float("nan"), float("nan"))
    assert not same(True, 1)
    assert not same(1, 1.0)
    assert not same({1: "a"}, {True: "a"})
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same([(1, 2)], [[1, 2]])


def compose(text: str) -> yaml.Node:
    return yaml.compose(text, Loader=FAST)


def safe_constructor(text: str) -> Any:
    return yaml.constructor.SafeConstructor().construct_document(compose(text))


def scale_shapes() -> dict[str, str]:
    with benchmark_module("render_scale") as render_scale:
        return {
            "groups-30x32": render_scale.groups_text(30, 32),
            "4-groups": render_scale.four_groups_text(1),
        }


def nested_mapping(levels: int) -> str:
    return "".join("  " * depth + f"k{depth}:\n" for depth in range(levels)) + "  " * levels + "v\n"


EDGE_CASES = {
    "ints": "decimal: 1950000\nsigned: [-42, +7, 0]\nhex: 0x1f\noctal: 017\nbinary: 0b101\n"
    "underscores: 1_000\n"
    "sexagesimal: [1:30, 190:20:30]\nnot_ints: [0o17, 1e3, 08]\n",
    "floats": "plain: 1.5\nexp: [6.8523015e+5, 1.0e+3, -1.5E-3]\nunderscores: 1_000.5\n"
    "sexagesimal: 190:20:30.15\n"
    "inf: [.inf, -.Inf, +.INF]\nnan: [.nan, .NaN, .NAN]\n",
    "bools": "words: [yes, No, ON, off, true, False, TRUE, Y, n]\n",
    "nulls": "word: null\ntilde: ~\ncapital: Null\nempty:\nitems: [~, null, ]\nblock:\n  -\n  - x\n",
    "timestamps": "date: 2002-12-14\ncanonical: 2001-12-15T02:59:43.1Z\niso: 2001-12-14t21:59:43.10-05:00\n"
    "spaced: 2001-12-14 21:59:43.10 -5\nno_zone: 2001-12-14 21:59:43.10\nexplicit: !!timestamp 2001-01-01\n",
    "binary": "gif: !!binary |\n  R0lGODlhDAAMAIQAAP//9/X17unp5WZmZgAAAOfn515eXvPz7Y6OjuDg4J+fn5OTk6enp56e\n"
    "  nmleECcgggoBADs=\n"
    "inline: !!binary aGVsbG8=\n",
    "quoted": "dq: \"123\"\nsq: 'true'\nnull_word: 'null'\nempty: ''\nescapes: \"tab\\there \\u00e9 \\x41\"\n"
    'joined: "a\n  b"\n',
    "block scalars": "literal: |\n  one\n  two\nfolded: >\n  one\n  two\nstrip: |-\n  x\nkeep: >+\n  y\n\n"
    "indented: |2\n    lead\n",
    "empty collections": "map: {}\nseq: []\nnested: [{}, [], {x: []}, [[{}]]]\n",
    "unicode": '名前: "✓ café"\n"\\u00e9": x\nemoji: 🚀\n',
    "scalar keys": "1: a\ntrue: b\nnull: c\n1.5: d\n2001-01-01: e\n0x10: f\n",
    "keys equal after building": "{1: a, 1.0: b, true: c, 0x1: d}\n",
    "keys that look special when quoted": "\"<<\": x\n'=': y\n",
    "explicit tags": 's: !!str 1\ni: !!int "3"\nf: !!float "1"\nb: !!bool "yes"\nn: !!null ""\n'
    "bare: !!str\nlong: !<tag:yaml.org,2002:str> x\nmap: !!map {a: 1}\nseq: !!seq [1]\n",
    "flow": '{a: [1, 2, {b: c}], "d": e, f: [g, [h, {i: j}]]}\n',
    "a list": "- a\n- [b, c]\n- {d: 1}\n",
    "a scalar": "42\n",
    "a string": "just text\n",
    "an ampersand in a string": 'a: "x & y"\nb: x&y\n',
    "nesting at the limit": "[" * MAX_NESTING + "]" * MAX_NESTING + "\n",
    "a mapping at the limit": nested_mapping(MAX_NESTING),
}


def corpus() -> dict[str, str]:
    shipped = {name: path.read_text() for name, path in SHIPPED_INVENTORIES.items()}
    return {**shipped, "BASE": BASE, **scale_shapes(), **EDGE_CASES}


CORPUS = corpus()


@pytest.mark.parametrize(("name", "text"), CORPUS.items(), ids=list(CORPUS))
def test_the_builder_builds_what_safe_constructor_builds(name: str, text: str) -> None:
    built = _build_plain(compose(text))
    assert same(built, safe_constructor(text)), name


def test_the_corpus_holds_the_scalars_it_claims():
    data = safe_constructor(EDGE_CASES["keys equal after building"])
    assert same(data, {1: "d"})
    ints = safe_constructor(EDGE_CASES["ints"])
    assert ints["hex"] == 31 and ints["octal"] == 15 and ints["sexagesimal"] == [90, 685230]
    assert ints["not_ints"] == ["0o17", "1e3", "08"]
    bools = [True, False, True, False, True, False, True, "Y", "n"]
    assert safe_constructor(EDGE_CASES["bools"])["words"] == bools
    assert type(safe_constructor(EDGE_CASES["binary"])["inline"]) is bytes
    assert type(safe_constructor(EDGE_CASES["timestamps"])["date"]) is datetime.date
    assert "&" in EDGE_CASES["an ampersand in a string"]


def outcome(action: Any) -> Any:
    """What an action ends with: its data, the problems of its InventoryError, or its exception."""
    try:
        return "data", action()
    except InventoryError as error:
        return "problems", [str(item) for item in error.problems]
    except Exception as error:  # noqa: BLE001  (which exception, and its text, is what is compared)
        return type(error), str(error)


def before(text: str) -> Any:
    """The fast path as it was: every check, then SafeConstructor, on libyaml's nodes."""
    return _construct_checked(compose(text), text, FILE, FAST)


def now(text: str) -> Any:
    return _compose_checked(text, FILE, FAST)[0]


LEFT_TO_THE_CHECKED_PATH = {
    "merge key": "base: {a: 1}\nx:\n  <<: {a: 2, b: 3}\n  c: 4\n",
    "merge key of a list": "x:\n  <<: [{a: 1}, {b: 2}]\n  a: 0\n",
    "merge key and an anchor": "base: &b {a: 1}\nx:\n  <<: *b\n  c: 4\n",
    "duplicate key": "a: 1\nb: 2\na: 3\n",
    "duplicate keys, nested and written differently": "a:\n  - {x: 1, 'x': 2}\n  - {1: a, \"1\": b}\n",
    "nesting of 65 levels": "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1) + "\n",
    "a mapping of 65 levels": nested_mapping(MAX_NESTING + 1),
    "a deep duplicate under deep nesting": "a: 1\na: 2\nb: " + "[" * 70 + "]" * 70 + "\n",
    "sequence key": "? [a]\n: 1\n",
    "mapping key": "? {a: 1}\n: 1\n",
    "value key": "=: 1\nb: 2\n",
    "value as a value": "a: =\n",
    "merge as a value": "a: <<\n",
    "set": "s: !!set {a, b}\n",
    "set as a block": "--- !!set\n? a\n? b\n",
    "omap": "o: !!omap [a: 1, b: 2]\n",
    "pairs": "p: !!pairs [a: 1, a: 2]\n",
    "unknown tag": "a: !custom x\n",
    "unknown tag on a mapping": "a: !custom {b: 1}\n",
    "python tag": "a: !!python/name:os.system\n",
    "python object": "a: !!python/object:collections.OrderedDict {}\n",
    "str tag on a mapping": "a: !!str {b: 1}\n",
    "map tag on a scalar": "a: !!map x\n",
    "seq tag on a mapping": "a: !!seq {b: 1}\n",
    "an int that is not": "a: !!int abc\n",
    "a float that is not": "a: !!float abc\n",
    "a bool that is not": "a: !!bool maybe\n",
    "a timestamp that is not": "a: !!timestamp abc\n",
    "binary that is not base64": "a: !!binary abc\n",
    "binary that is not ascii": "a: !!binary 'é'\n",
}


@pytest.mark.parametrize(
    ("name", "text"), LEFT_TO_THE_CHECKED_PATH.items(), ids=list(LEFT_TO_THE_CHECKED_PATH)
)
def test_what_the_builder_leaves_ends_as_before(name: str, text: str) -> None:
    if "&" not in text:
        with pytest.raises(_Unbuilt):
            _build_plain(compose(text))
    was, is_now = outcome(lambda: before(text)), outcome(lambda: now(text))
    assert was[0] == is_now[0], (name, was, is_now)
    assert same(is_now[1], was[1]) if was[0] == "data" else is_now == was


def test_what_is_left_is_reported_with_the_line_of_the_checks():
    text = LEFT_TO_THE_CHECKED_PATH["duplicate key"]
    expected = [f"{FILE}:3: a: duplicate key 'a' (the first would be lost)"]
    assert outcome(lambda: now(text)) == ("problems", expected)
    text = LEFT_TO_THE_CHECKED_PATH["a mapping of 65 levels"]
    expected = [f"{FILE}:{MAX_NESTING + 1}: (yaml): nested more than {MAX_NESTING} levels deep"]
    assert outcome(lambda: now(text)) == ("problems", expected)
    # the nesting check runs first, as before, although the duplicate comes first in the text
    text = LEFT_TO_THE_CHECKED_PATH["a deep duplicate under deep nesting"]
    expected = [f"{FILE}:3: (yaml): nested more than {MAX_NESTING} levels deep"]
    assert outcome(lambda: now(text)) == ("problems", expected)


def test_a_plain_inventory_is_built_in_one_walk(monkeypatch):
    def refuse(*_: Any) -> Any:
        raise AssertionError("the checked path was taken")

    monkeypatch.setattr(yaml.constructor.SafeConstructor, "construct_document", refuse)
    monkeypatch.setattr(loader, "_check_duplicates", refuse)
    monkeypatch.setattr(loader, "_check_composed_nesting", refuse)
    for path in SHIPPED_INVENTORIES.values():
        loader.load_cluster(path)


def test_a_duplicate_key_takes_the_checked_path(monkeypatch):
    checked = []
    check_duplicates = loader._check_duplicates

    def record(root: yaml.Node, file: str) -> None:
        checked.append(file)
        check_duplicates(root, file)

    monkeypatch.setattr(loader, "_check_duplicates", record)
    text = edit(BASE, "login: [head]\n", "login: [head]\nlogin: [box]\n")
    message = "duplicate key 'login' (the first would be lost)"
    assert problems(text) == [problem(text, "login: [box]", "login", message)]
    assert checked == [FILE]
