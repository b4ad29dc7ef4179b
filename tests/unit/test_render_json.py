"""render.common.json_text writes exactly what json.dumps(value, indent=2) writes, json_lines the
same but with the containers of one depth on one line each, as json.dumps(item) writes them (the
Ansible inventories are written with them, for speed: issue 17 item 5)."""

from __future__ import annotations

import enum
import json

import pytest

from cluster_cli.render.common import JsonMembers, json_lines, json_text


class Port(enum.IntEnum):
    SLURMD = 6818


VALUES = [
    {},
    [],
    "plain",
    "é, \"quoted\"\n\ttab \u2028 \U0001f600",
    0,
    -7,
    10**30,
    2.5,
    1e100,
    True,
    False,
    None,
    Port.SLURMD,
    {"a": [1, 2.5, True, None, {}, [], "x"], "b": {"c": {"d": []}}},
    {2: "int key", True: "bool key", None: "null key", 2.5: "float key", "s": ("a", "tuple")},
    [[[]], [{}], [{"k": [{"deep": None}]}]],
    [{1: "one"}, {True: "true"}, {1.0: "float"}, {"1": "string"}],
    {"all": {"children": {"cluster": {"hosts": {"n1": {"ansible_port": 22, "slurmd_nodes": [
        {"name": "n1", "port": Port.SLURMD, "fake_gpus": [{"path": "/dev/fake-gpu/nvidia0", "minor": 0}]}
    ]}}}}}},
]


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_json_text_is_json_dumps_indent_2(value):
    assert json_text(value) == json.dumps(value, indent=2)


def test_json_text_refuses_what_json_refuses():
    with pytest.raises(TypeError):
        json_text({"a": {1, 2}})


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
def test_json_lines_is_json_dumps_indented_down_to_the_flat_depth(value):
    assert json_lines(value, 0) == json.dumps(value)
    assert json_lines(value, 99) == json.dumps(value, indent=2)
    for depth in range(1, 6):
        assert json.loads(json_lines(value, depth)) == json.loads(json.dumps(value))


def test_json_lines_writes_each_container_of_the_flat_depth_on_one_line():
    value = {"hosts": {"n1": {"port": 22, "nodes": [{"name": "n1"}]}, "n2": {}}, "vars": {"user": "root"}}
    assert json_lines(value, 2).splitlines() == [
        "{",
        '  "hosts": {',
        '    "n1": {"port": 22, "nodes": [{"name": "n1"}]},',
        '    "n2": {}',
        "  },",
        '  "vars": {',
        '    "user": "root"',
        "  }",
        "}",
    ]


def test_json_lines_refuses_what_json_refuses():
    with pytest.raises(TypeError):
        json_lines({"a": {"b": {1, 2}}}, 1)


def test_json_members_are_written_as_they_are_one_line_each():
    value = {"hosts": JsonMembers(['"n1": {"port": 22}', '"n2": {}']), "none": JsonMembers()}
    assert json_lines(value, 5) == '{\n  "hosts": {\n    "n1": {"port": 22},\n    "n2": {}\n  },\n  "none": {}\n}'
