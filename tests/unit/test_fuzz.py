"""Fuzzing the inventory reader: whatever the file holds, cluster-cli answers with a Cluster or
with InventoryError problems that each name a file, a line in it, a field and a message, never
with any other exception; a cluster it accepts always renders."""

from __future__ import annotations

import copy
import re
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from unit_helpers import BASE, SHIPPED_INVENTORIES, all_paths

from cluster_cli.cli import main
from cluster_cli.cluster import Cluster
from cluster_cli.errors import InventoryError
from cluster_cli.loader import load_cluster_text
from cluster_cli.render import render_configs
from cluster_cli.render.ansible_inventory import render_ansible_inventory

FILE = "fuzz.yaml"
SHIPPED_TEXTS = {name: path.read_text() for name, path in SHIPPED_INVENTORIES.items()}
SHIPPED_TEXTS["base"] = BASE
SHIPPED_DATA = {name: yaml.safe_load(text) for name, text in SHIPPED_TEXTS.items()}
PASSWORD = "fuzzPassword123"
KEY_VALUE = re.compile(r"^[A-Za-z][A-Za-z0-9]*=\S*$")
# oci.conf's values are runtime command patterns, each one whole in double quotes (render/oci_conf.py)
QUOTED_KEY_VALUE = re.compile(r'^[A-Za-z][A-Za-z0-9]*="[^"\n]*"$')


def check_outcome(text: str) -> Cluster | None:
    """The fuzzing oracle: a Cluster that renders, or well-formed problems; nothing else."""
    try:
        cluster = load_cluster_text(text, FILE)
    except InventoryError as error:
        assert error.problems, "an InventoryError must carry at least one problem"
        last_line = max(1, len(text.splitlines()))
        for problem in error.problems:
            assert problem.file == FILE
            assert isinstance(problem.line, int) and 1 <= problem.line <= last_line + 1, problem
            assert isinstance(problem.field, str) and problem.field, problem
            assert isinstance(problem.message, str) and problem.message, problem
            assert "\n" not in str(problem), "a problem is one line"
        return None
    check_renders(cluster)
    return cluster


def check_renders(cluster: Cluster) -> None:
    """Every file renders; every setting line of the Slurm files is Key=Value words (oci.conf's: one
    Key="value" each)."""
    files = render_configs(cluster, PASSWORD)
    for item in files:
        if item.path.startswith("slurm/"):
            for line in item.content.splitlines():
                if not line or line.startswith("#"):
                    continue
                if item.path == "slurm/oci.conf":
                    assert QUOTED_KEY_VALUE.match(line), f"{item.path}: {line!r}"
                    continue
                for word in line.split(" "):
                    assert KEY_VALUE.match(word), f"{item.path}: {line!r}"
        assert item.content.endswith("\n")
    inventory = yaml.safe_load(render_ansible_inventory(cluster))
    assert set(inventory["all"]["children"]["cluster"]["hosts"]) == set(cluster.hosts)


# -- random documents ------------------------------------------------------------------------------

FIELD_NAMES = sorted(
    {
        "cluster_name",
        "hosts",
        "controllers",
        "primary",
        "backup",
        "port",
        "accounting",
        "enabled",
        "host",
        "login",
        "node_groups",
        "name",
        "nodes",
        "base_port",
        "addresses",
        "sockets",
        "cores_per_socket",
        "threads_per_core",
        "cpus",
        "real_memory_mb",
        "gpus",
        "count",
        "type",
        "autodetect",
        "devices",
        "fake",
        "features",
        "weight",
        "partitions",
        "default",
        "max_time",
        "options",
        "topology",
        "plugin",
        "switches",
        "blocks",
        "block_sizes",
        "cgroup",
        "version",
        "overrides",
        "slurm",
        "conf",
        "paths",
        "nccl",
        "env",
        "training",
        "thresholds",
        "secrets",
        "dir",
        "ssh",
        "user",
        "address",
        "connection",
    }
)
hostlist_like = st.text(alphabet="abn01239[]-,./ ", min_size=0, max_size=14)
known_words = st.sampled_from(
    [
        "head",
        "box",
        "gpu",
        "dev",
        "gpu1",
        "dev[1-2]",
        "gpu[1-4]",
        "node[1-3]",
        "/dev/nvidia[0-1]",
        "tree",
        "block",
        "nvml",
        "off",
        "local",
        "ssh",
        "v2",
        "auto",
        "17001",
        "INFINITE",
        "leaf[1-2]",
        "a100",
    ]
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 70000),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    hostlist_like,
    known_words,
)
keys = st.one_of(st.sampled_from(FIELD_NAMES), st.text(min_size=1, max_size=8), st.integers(0, 3))
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
    max_leaves=12,
)
documents = st.dictionaries(st.sampled_from(FIELD_NAMES), values, max_size=8)


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


@given(documents)
def test_random_documents(data):
    check_outcome(dump(data))


@given(values)
def test_random_top_level_values(data):
    check_outcome(dump(data))


@given(st.text(max_size=200))
def test_random_text(text):
    check_outcome(text)


# -- mutations of the shipped inventories --------------------------------------------------------




def parent_and_key(document: Any, path: tuple) -> tuple[Any, Any]:
    node = document
    for part in path[:-1]:
        node = node[part]
    return node, path[-1]


@st.composite
def mutated_inventories(draw) -> str:
    name = draw(st.sampled_from(sorted(SHIPPED_DATA)))
    document = copy.deepcopy(SHIPPED_DATA[name])
    for _ in range(draw(st.integers(1, 4))):
        paths = [path for path in all_paths(document) if path]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = parent_and_key(document, path)
        operation = draw(st.sampled_from(["delete", "replace", "replace", "hostlist", "add_key", "repeat"]))
        if operation == "delete":
            del parent[key]
        elif operation == "replace":
            parent[key] = draw(values)
        elif operation == "hostlist":
            parent[key] = draw(hostlist_like)
        elif operation == "add_key" and isinstance(parent[key], dict):
            parent[key][draw(keys)] = draw(values)
        elif operation == "repeat" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
    return dump(document)


@given(mutated_inventories())
def test_mutated_shipped_inventories(text):
    check_outcome(text)


@st.composite
def edited_texts(draw) -> str:
    """Line-level edits a person makes by mistake: lost or doubled lines, stray characters, bad indentation."""
    lines = SHIPPED_TEXTS[draw(st.sampled_from(sorted(SHIPPED_TEXTS)))].splitlines()
    for _ in range(draw(st.integers(1, 3))):
        index = draw(st.integers(0, len(lines) - 1))
        operation = draw(st.sampled_from(["drop", "double", "indent", "dedent", "insert", "swap"]))
        if operation == "drop" and len(lines) > 1:
            del lines[index]
        elif operation == "double":
            lines.insert(index, lines[index])
        elif operation == "indent":
            lines[index] = "  " + lines[index]
        elif operation == "dedent":
            lines[index] = lines[index].lstrip()
        elif operation == "insert":
            position = draw(st.integers(0, len(lines[index])))
            lines[index] = (
                lines[index][:position]
                + draw(st.text(alphabet=":-[]{}#&*!|>'\" \tax1", max_size=3))
                + lines[index][position:]
            )
        elif operation == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
    return "\n".join(lines) + "\n"


@given(edited_texts())
def test_edited_shipped_inventories(text):
    check_outcome(text)


# -- random valid clusters: they always render -----------------------------------------------------

name_chars = st.text(alphabet="abcdefgh", min_size=1, max_size=4)


@st.composite
def plausible_inventories(draw) -> str:
    """Inventories close to valid, with random sizes, ports, GPUs, partitions and a tree."""
    groups = []
    used_prefixes: set[str] = set()
    for index in range(draw(st.integers(1, 3))):
        prefix = draw(name_chars.filter(lambda p: p not in used_prefixes))
        used_prefixes.add(prefix)
        count = draw(st.integers(1, 40))
        width = draw(st.sampled_from([1, 2, 3]))
        nodes = f"{prefix}[{'1'.zfill(width)}-{count}]" if count > 1 else f"{prefix}{'1'.zfill(width)}"
        group: dict[str, Any] = {
            "name": f"g{index}",
            "nodes": nodes,
            "sockets": draw(st.integers(1, 4)),
            "cores_per_socket": draw(st.integers(1, 64)),
            "threads_per_core": draw(st.sampled_from([1, 2])),
            "real_memory_mb": draw(st.integers(1, 2_000_000)),
        }
        single_host = draw(st.booleans())
        gpus = draw(st.integers(0, 8))
        if single_host:
            group["host"] = "box"
            group["base_port"] = 20000 + 100 * index
        elif draw(st.booleans()):
            group["addresses"] = (
                f"10.{index}.{draw(st.integers(0, 9))}.[1-{count}]" if count > 1 else f"10.{index}.0.1"
            )
        if gpus:
            group["gpus"] = {"count": gpus, "type": draw(st.sampled_from(["h100", "a100", "fake"]))}
            if single_host:
                group["gpus"]["devices"] = f"/dev/g{index}/nvidia[0-{gpus * count - 1}]"
                group["gpus"]["fake"] = draw(st.booleans())
            elif draw(st.booleans()):
                group["gpus"]["autodetect"] = "nvml"
            else:
                group["gpus"]["devices"] = f"/dev/nvidia[0-{gpus - 1}]" if gpus > 1 else "/dev/nvidia0"
        if draw(st.booleans()):
            group["features"] = draw(st.lists(name_chars, max_size=3, unique=True))
        groups.append(group)
    partitions = [{"name": "all", "nodes": [group["name"] for group in groups], "default": True}]
    if draw(st.booleans()):
        partitions.append({"name": "first", "nodes": [groups[0]["name"]], "max_time": "1-00:00:00"})
    document: dict[str, Any] = {
        "cluster_name": "fuzz",
        "hosts": [{"name": "head", "address": "10.99.0.1"}]
        + ([{"name": "box"}] if any("host" in group for group in groups) else []),
        "controllers": {"primary": "head"},
        "accounting": {"host": "head"} if draw(st.booleans()) else {"enabled": False},
        "node_groups": groups,
        "partitions": partitions,
    }
    if draw(st.booleans()):
        switches = [{"name": f"leaf{index}", "nodes": group["nodes"]} for index, group in enumerate(groups)]
        switches.append(
            {"name": "spine", "switches": f"leaf[0-{len(groups) - 1}]" if len(groups) > 1 else "leaf0"}
        )
        document["topology"] = {"plugin": "tree", "switches": switches}
    if draw(st.booleans()):
        document["slurm"] = {"conf": {"KillWait": draw(st.integers(1, 100)), "Waittime": None}}
    return dump(document)


@given(plausible_inventories())
def test_plausible_inventories_load_or_explain_and_always_render(text):
    cluster = check_outcome(text)
    if cluster is None:
        return
    # the rendered node lines cover exactly the model's nodes
    from cluster_cli import hostlist
    from cluster_cli.render.slurm_conf import node_lines

    named = [
        name
        for line in node_lines(cluster)
        for name in hostlist.expand(line.split(" ")[0].removeprefix("NodeName="))
    ]
    assert sorted(named) == sorted(node.name for node in cluster.nodes)


# -- the CLI on fuzzed files ---------------------------------------------------------------------


@given(st.one_of(mutated_inventories(), edited_texts()))
def test_cli_validate_on_fuzzed_files(text):
    runner = CliRunner()
    with runner.isolated_filesystem():
        with open("inventory.yaml", "w", encoding="utf-8") as handle:
            handle.write(text)
        result = runner.invoke(main, ["validate", "inventory.yaml"])
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    if result.exit_code == 2:
        assert "inventory.yaml:" in result.output and "nothing was changed" in result.output
