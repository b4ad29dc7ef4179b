"""The fast block-YAML writer of the Ansible inventory writes exactly what PyYAML writes."""

from __future__ import annotations

import yaml
from hypothesis import given
from hypothesis import strategies as st
from unit_helpers import SHIPPED_INVENTORIES

from cluster_cli.cluster import load_cluster
from cluster_cli.render import block_yaml
from cluster_cli.render.ansible_inventory import inventory_document


def reference(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def test_shipped_inventories(monkeypatch):
    monkeypatch.setenv("HOME", "/home/operator")
    for path in SHIPPED_INVENTORIES.values():
        document = inventory_document(load_cluster(path))
        assert block_yaml.dump(document) == reference(document)


words = st.sampled_from(
    [
        "node1",
        "10.0.0.1",
        "/dev/nvidia0",
        "yes",
        "no",
        "on",
        "null",
        "~",
        "1e3",
        "0x1F",
        "0755",
        "1:20",
        "2001-01-01",
        "",
        " lead",
        "trail ",
        "a: b",
        "a #b",
        "-x",
        "- x",
        "?x",
        "&a",
        "*a",
        "!t",
        "|",
        ">",
        "'q'",
        '"q"',
        "%p",
        "@a",
        "`b",
        "=",
        "<<",
        ".inf",
        ".nan",
        "True",
        "FALSE",
        "a,b",
        "[x]",
        "{x}",
        "x\ny",
        "\t",
        "é",
        "\u2028",
        "\x85",
    ]
)
long_texts = st.text(alphabet="ab -o=/:#'\"", min_size=60, max_size=200)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    words,
    st.text(max_size=20),
    long_texts,
)
keys = st.one_of(
    st.sampled_from(["ansible_host", "name", "port", "slurmd_nodes", "yes", "1", "a b", "x" * 130]),
    st.text(max_size=8),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
    max_leaves=20,
)


@given(st.dictionaries(keys, documents, min_size=1, max_size=5))
def test_random_documents_match_pyyaml(data):
    assert block_yaml.dump(data) == reference(data)


plain_keys = st.sampled_from(
    ["ansible_host", "name", "port", "hosts", "children", "a", "b1", "node-01", "x.y"]
)
# shapes the fast writer handles itself: lists hold scalars or non-empty mappings
fast_documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(
            st.one_of(scalars, st.dictionaries(plain_keys, children, min_size=1, max_size=3)), max_size=3
        ),
        st.dictionaries(plain_keys, children, max_size=4),
    ),
    max_leaves=25,
)


@given(st.dictionaries(plain_keys, fast_documents, min_size=1, max_size=4))
def test_documents_the_fast_writer_handles_match_pyyaml(data):
    out: list[str] = []
    block_yaml._mapping(data, 0, (), out, None)  # no fallback to PyYAML for these shapes
    assert block_yaml.dump(data) == reference(data)


@given(
    st.dictionaries(
        st.sampled_from(["h1", "h2", "h3"]),
        st.fixed_dictionaries(
            {
                "ansible_host": words,
                "ansible_ssh_common_args": long_texts,
                "slurmd_nodes": st.lists(
                    st.fixed_dictionaries(
                        {
                            "name": words,
                            "port": st.integers(1, 65535),
                            "fake_gpus": st.lists(
                                st.fixed_dictionaries({"path": words, "minor": st.integers(0, 9)}), max_size=2
                            ),
                        }
                    ),
                    max_size=2,
                ),
            }
        ),
        min_size=1,
    )
)
def test_inventory_shaped_documents_match_pyyaml(hosts):
    data = {"all": {"children": {"cluster": {"hosts": hosts}}}}
    assert block_yaml.dump(data) == reference(data)


def test_equal_but_different_scalars_are_not_mixed_up():
    data = {"a": [0.0, -0.0, 1, True, 1.0], "b": {"x": "yes", "y": True}}
    assert block_yaml.dump(data) == reference(data)
