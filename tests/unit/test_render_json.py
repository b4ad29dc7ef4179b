"""render.common.json_text writes exactly what json.dumps(value, indent=2) writes (the Ansible
inventories are written with it, for speed: issue 17 item 5)."""

from __future__ import annotations

import enum
import json

import pytest

from cluster_cli.render.common import json_text


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
    {1: "int key", True: "bool key", None: "null key", 2.5: "float key", "s": ("a", "tuple")},
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
