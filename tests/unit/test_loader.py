"""Reading an inventory: YAML errors, schema errors, unknown keys, lines and fields of every problem."""

from __future__ import annotations

import time
import tracemalloc

import pytest
import yaml
from unit_helpers import BASE, FILE, edit, line_of, problem, problems

from cluster_cli import loader
from cluster_cli.errors import InventoryError, Problem, format_location
from cluster_cli.loader import (
    _compose_checked,
    MAX_ALIAS_EXPANSION,
    MAX_INVENTORY_BYTES,
    MAX_NESTING,
    load_cluster,
    load_cluster_text,
)
from cluster_cli.model import GpuThreshold, Inventory, NodeGroup, _check_config_text

# "known fields" in unknown-key messages lists the model's fields, whatever they are today
TOP_FIELDS = ", ".join(sorted(Inventory.model_fields))
GROUP_FIELDS = ", ".join(sorted(NodeGroup.model_fields))
THRESHOLD_FIELDS = ", ".join(sorted(GpuThreshold.model_fields))


def test_the_base_inventory_is_valid():
    assert problems(BASE) == []


# -- YAML itself -----------------------------------------------------------------------------------


def test_invalid_yaml_names_the_line_of_the_syntax_error():
    text = edit(BASE, "login: [head]", "login: [head")
    # the flow sequence runs into the next key; PyYAML notices on the line after it
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'node_groups:')}: (yaml): invalid YAML: expected ',' or ']', but got ':'"
    ]


def test_tab_indentation_is_invalid_yaml():
    text = edit(BASE, "  primary: head", "\tprimary: head")
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'primary: head')}: (yaml): invalid YAML: found character '\\t' that cannot start any token"
    ]


def test_several_documents_are_refused():
    text = BASE + "---\ncluster_name: other\n"
    assert problems(text) == [
        f"{FILE}:{line_of(text, '---')}: (yaml): invalid YAML: but found another document"
    ]


def test_unhashable_key_is_invalid_yaml():
    assert problems("? [a, b]\n: 1\n") == [f"{FILE}:1: (yaml): invalid YAML: found unhashable key"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("!!int abc", "cannot read 'abc' as !!int"),
        ("!!float abc", "cannot read 'abc' as !!float"),
        ("!!bool maybe", "cannot read 'maybe' as !!bool"),
        ("!!timestamp abc", "cannot read 'abc' as !!timestamp"),
        ("!!binary abc", "failed to decode base64 data: Incorrect padding"),
    ],
)
@pytest.mark.parametrize("anchored", [False, True], ids=["libyaml", "with an anchor"])
def test_a_value_its_explicit_tag_cannot_read_is_invalid_yaml(value, message, anchored):
    # SafeConstructor raises ValueError, KeyError or AttributeError for these: a crash, before
    anchor = "&port " if anchored else ""
    text = edit(BASE, "login: [head]", f"login: [head]\nweird: {anchor}{value}")
    assert problems(text) == [f"{FILE}:{line_of(text, 'weird:')}: (yaml): invalid YAML: {message}"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("", "empty"),
        ("# only a comment\n", "empty"),
        ("~\n", "empty"),
        ("- cluster_name: x\n", "a list"),
        ("just a string\n", "a str"),
        ("42\n", "a int"),
    ],
)
def test_top_level_must_be_a_mapping(text, kind):
    assert problems(text) == [f"{FILE}:1: (top level): an inventory is a mapping of fields, not {kind}"]


def test_duplicate_keys_are_reported_at_the_second_occurrence():
    text = edit(BASE, "login: [head]\n", "login: [head]\nlogin: [box]\n")
    text = edit(text, "    cores_per_socket: 8\n", "    cores_per_socket: 8\n    cores_per_socket: 16\n")
    assert problems(text) == [
        problem(text, "login: [box]", "login", "duplicate key 'login' (the first would be lost)"),
        problem(
            text,
            "cores_per_socket: 16",
            "node_groups[0].cores_per_socket",
            "duplicate key 'cores_per_socket' (the first would be lost)",
        ),
    ]


def test_duplicate_keys_inside_override_maps():
    text = BASE + "slurm:\n  conf:\n    KillWait: 10\n    KillWait: 20\n"
    assert problems(text) == [
        problem(
            text, "KillWait: 20", "slurm.conf.KillWait", "duplicate key 'KillWait' (the first would be lost)"
        )
    ]


def test_deep_nesting_is_refused_not_a_recursion_error():
    text = "cluster_name: " + "[" * 5000 + "]" * 5000 + "\n"
    assert problems(text) == [f"{FILE}:1: (yaml): nested more than {MAX_NESTING} levels deep"]
    text = "a:\n" + "".join("  " * depth + f"k{depth}:\n" for depth in range(1, 100))
    assert problems(text) == [f"{FILE}:{MAX_NESTING + 1}: (yaml): nested more than {MAX_NESTING} levels deep"]


def _indentless(levels: int) -> str:
    """``levels`` collections: mappings whose values are sequences written at their key's indentation."""
    lines, indent = [], ""
    for level in range(1, levels, 2):
        lines += [f"{indent}k{level}:", f"{indent}- x"]
        indent += "  "
        lines[-1] = f"{indent[:-2]}- k{level + 1}:"
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [MAX_NESTING - 1, MAX_NESTING + 3])
def test_libyaml_and_the_pure_python_parser_count_the_same_levels(levels: int) -> None:
    # every collection is a level, a sequence at its key's indentation too (it has no block-start token)
    text = _indentless(levels)
    verdicts = []
    for yaml_loader in (yaml.CSafeLoader, yaml.SafeLoader):
        try:
            _compose_checked(text, FILE, yaml_loader)
            verdicts.append("read")
        except InventoryError as error:
            verdicts.append(str(error.problems[0]))
    assert verdicts[0] == verdicts[1]
    assert (verdicts[0] == "read") is (levels <= MAX_NESTING), verdicts


def test_nesting_up_to_the_limit_is_read():
    text = "cluster_name: " + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "\n"
    assert f"{FILE}:1: cluster_name: Input should be a valid string" in problems(text)


EXPANSION = f"aliases (*name) or merge keys (<<) repeat more than {MAX_ALIAS_EXPANSION:,} values"


def test_alias_bombs_are_refused_in_linear_time():
    text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for level in range(1, 10):
        text += f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]\n"
    started = time.perf_counter()
    found = problems(text)
    assert time.perf_counter() - started < 5
    # a4 repeats a3 (11,111 values) ten times, the first to pass 100,000 in all
    assert found == [f"{FILE}:{line_of(text, 'a4: &a4')}: (yaml): {EXPANSION}"]


def merge_key_bomb(levels: int) -> str:
    """The issue's bomb: each level merges the one before nine times, 9**levels keys in all."""
    text = BASE + "x0: &x0 {k0: 1, k1: 2, k2: 3, k3: 4, k4: 5, k5: 6, k6: 7, k7: 8}\n"
    for level in range(1, levels + 1):
        text += f"x{level}: &x{level} {{<<: [" + ", ".join([f"*x{level - 1}"] * 9) + "]}\n"
    return text


def test_a_merge_key_bomb_is_refused_at_once_with_one_problem():
    # the issue's size; without the limit: about 20 s and 1.5 GB, and 2 million problems
    text = merge_key_bomb(6)
    assert len(text) - len(BASE) < 600
    started = time.perf_counter()
    found = problems(text)
    assert time.perf_counter() - started < 2
    assert found == [f"{FILE}:{line_of(text, 'x4: &x4')}: (yaml): {EXPANSION}"]


def test_a_merge_key_bomb_is_refused_in_little_memory():
    # five levels: without the limit this one alone allocates about 200 MB
    text = merge_key_bomb(5)
    tracemalloc.start()
    try:
        found = problems(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 1024 * 1024, f"peak {peak / 2**20:.0f} MiB"
    assert found == [f"{FILE}:{line_of(text, 'x4: &x4')}: (yaml): {EXPANSION}"]


def test_aliases_may_repeat_up_to_the_limit(monkeypatch):
    # the limit counts repeated values only: a long inventory without aliases is never refused by it
    monkeypatch.setattr(loader, "MAX_ALIAS_EXPANSION", 3)
    text = edit(BASE, "login: [head]", "login: [head]\nx: &x [a, b]\ny: [*x]")
    assert problems(text) == [
        problem(text, "x: &x", "x", f"unknown field; known fields: {TOP_FIELDS}"),
        problem(text, "y: [", "y", f"unknown field; known fields: {TOP_FIELDS}"),
    ]
    text = edit(BASE, "login: [head]", "login: [head]\nx: &x [a, b]\ny: [*x, *x]")
    message = "aliases (*name) or merge keys (<<) repeat more than 3 values"
    assert problems(text) == [problem(text, "y: [", "(yaml)", message)]


def test_yaml_merge_keys_and_anchors_work():
    text = edit(
        BASE,
        "  - name: dev\n    nodes: dev[1-2]\n",
        "  - name: dev\n    <<: &small {cores_per_socket: 2, real_memory_mb: 1000}\n    nodes: dev[1-2]\n",
    )
    text = edit(
        text,
        "    base_port: 17001\n    cores_per_socket: 2\n    real_memory_mb: 1000\n",
        "    base_port: 17001\n",
    )
    assert problems(text) == []


def test_a_key_written_beside_a_merge_key_overrides_the_merged_one():
    text = edit(
        BASE,
        "  - name: dev\n    nodes: dev[1-2]\n",
        "  - name: dev\n    <<: {cores_per_socket: 4, threads_per_core: 2}\n    nodes: dev[1-2]\n",
    )
    group = load_cluster_text(text, FILE).inventory.node_groups[1]
    assert (group.cores_per_socket, group.threads_per_core) == (2, 2)


def test_two_merge_keys_in_one_mapping_are_a_duplicate():
    text = BASE + "x: &x {a: 1}\ny:\n  <<: *x\n  <<: *x  # again\n"
    assert problem(text, "# again", "y.<<", "duplicate key '<<' (the first would be lost)") in problems(text)


# -- schema errors ---------------------------------------------------------------------------------


def test_unknown_top_level_key_suggests_the_close_one():
    text = edit(BASE, "login: [head]", "logn: [head]")
    assert problems(text) == [
        problem(text, "logn:", "logn", f"unknown field (did you mean 'login'?); known fields: {TOP_FIELDS}")
    ]


def test_unknown_nested_key_suggests_the_close_one_and_the_missing_field_is_reported_too():
    text = edit(BASE, "    cores_per_socket: 8\n", "    cores_per_sockt: 8\n")
    assert problems(text) == [
        # a missing field is reported at the line of the mapping it is missing from
        problem(text, "  - name: gpu", "node_groups[0].cores_per_socket", "required field is missing"),
        problem(
            text,
            "cores_per_sockt",
            "node_groups[0].cores_per_sockt",
            f"unknown field (did you mean 'cores_per_socket'?); known fields: {GROUP_FIELDS}",
        ),
    ]


def test_unknown_key_far_from_any_field_has_no_suggestion():
    text = BASE + "zzzq: 1\n"
    assert problems(text) == [problem(text, "zzzq", "zzzq", f"unknown field; known fields: {TOP_FIELDS}")]


def test_unknown_key_under_a_dict_of_models():
    text = BASE + "training:\n  thresholds:\n    h100:\n      matmul_bf16_tflop: 700\n"
    assert problems(text) == [
        problem(
            text,
            "matmul_bf16_tflop",
            "training.thresholds.h100.matmul_bf16_tflop",
            f"unknown field (did you mean 'matmul_bf16_tflops'?); known fields: {THRESHOLD_FIELDS}",
        )
    ]


def test_missing_required_top_level_fields_point_at_line_1():
    text = "cluster_name: x\n"
    assert problems(text) == [
        f"{FILE}:1: controllers: required field is missing",
        f"{FILE}:1: node_groups: required field is missing",
        f"{FILE}:1: partitions: required field is missing",
    ]


def test_wrong_types_and_ranges_name_field_and_line():
    text = edit(BASE, "cores_per_socket: 8", "cores_per_socket: eight")
    text = edit(text, "base_port: 17001", "base_port: 70000")
    text = edit(text, "count: 2", "count: 0")
    text = edit(text, "  host: head\nlogin", "  host: head\n  enabled: maybe\nlogin")
    assert problems(text) == [
        problem(
            text,
            "enabled: maybe",
            "accounting.enabled",
            "Input should be a valid boolean, unable to interpret input",
        ),
        problem(
            text,
            "cores_per_socket: eight",
            "node_groups[0].cores_per_socket",
            "Input should be a valid integer, unable to parse string as an integer",
        ),
        problem(text, "count: 0", "node_groups[0].gpus.count", "Input should be greater than or equal to 1"),
        problem(
            text,
            "base_port: 70000",
            "node_groups[1].base_port",
            "Input should be less than or equal to 65535",
        ),
    ]


def test_patterns_get_readable_messages():
    text = edit(BASE, "cluster_name: test", "cluster_name: Test Cluster")
    text = edit(text, "  - name: gpu\n", "  - name: -gpu\n")
    assert problems(text) == [
        problem(
            text,
            "cluster_name",
            "cluster_name",
            "must be 1-40 lowercase letters, digits, '-' or '_', starting with a letter",
        ),
        problem(
            text,
            "name: -gpu",
            "node_groups[0].name",
            "must be a name of letters, digits, '.', '_' or '-', starting and ending with a letter or digit",
        ),
    ]


def test_a_bad_hostlist_is_a_field_error():
    text = edit(BASE, "nodes: gpu[1-4]", "nodes: gpu[4-1]")
    assert problems(text) == [
        problem(text, "nodes: gpu[4-1]", "node_groups[0].nodes", "range '4-1' goes backwards in 'gpu[4-1]'")
    ]


def test_section_given_as_null_or_list():
    assert problems(BASE + "slurm:\n") == [
        f"{FILE}:{line_of(BASE + 'slurm:', 'slurm:')}: slurm: Input should be a valid dictionary or instance of Slurm"
    ]
    text = edit(BASE, "nodes: [gpu, dev]", "nodes: gpu")
    assert problems(text) == [
        problem(text, "nodes: gpu$", "partitions[0].nodes", "Input should be a valid list")
    ]


def test_override_keys_and_values_are_checked_one_by_one():
    text = BASE + (
        "slurm:\n  conf:\n    kill-wait: 1\n    Prolog: [a]\n    MaxTime: 'a b'\n    Epilog: 'x#y'\n"
        '    SlurmctldParameters: "a\\nNodeName=evil"\n    KillWait: 30\n'
    )
    assert problems(text) == [
        problem(
            text,
            "kill-wait",
            "slurm.conf.kill-wait",
            "'kill-wait' is not a configuration key (letters and digits, e.g. KillWait)",
        ),
        problem(
            text,
            "Prolog",
            "slurm.conf.Prolog",
            "value must be a scalar (string, number, yes/no) or null to delete",
        ),
        problem(
            text,
            "MaxTime",
            "slurm.conf.MaxTime",
            "'a b': a Slurm config value cannot hold white space, '#' or control characters",
        ),
        problem(
            text,
            "Epilog",
            "slurm.conf.Epilog",
            "'x#y': a Slurm config value cannot hold white space, '#' or control characters",
        ),
        problem(
            text,
            "SlurmctldParameters",
            "slurm.conf.SlurmctldParameters",
            "'a\\nNodeName=evil': a Slurm config value cannot hold white space, '#' or control characters",
        ),
    ]


def test_values_written_into_configs_cannot_break_lines():
    text = edit(BASE, "address: 10.0.0.1", "address: '10.0.0.1(x)'")
    text = edit(text, "    default: true\n", "    default: true\n    max_time: 1 day\n")
    text = edit(text, "devices: /dev/nvidia[0-1]", 'devices: "/dev/nvidia[0-1]#"')
    text += 'slurm:\n  paths:\n    log_dir: /var/log/my logs\nnccl:\n  env:\n    NCCL_DEBUG: "INFO\\nNCCL_X=1"\n    DEBUG: x\n'
    assert problems(text) == [
        problem(
            text,
            "address: '10.0.0.1(x)'",
            "hosts[0].address",
            "'10.0.0.1(x)': an address cannot hold ',', '(', ')', '[', ']' or '='",
        ),
        problem(
            text,
            "/dev/nvidia[0-1]#",
            "node_groups[0].gpus.devices",
            "'/dev/nvidia[0-1]#': a Slurm config value cannot hold white space, '#' or control characters",
        ),
        problem(
            text,
            "max_time: 1 day",
            "partitions[0].max_time",
            "'1 day': a Slurm config value cannot hold white space, '#' or control characters",
        ),
        problem(
            text,
            "log_dir",
            "slurm.paths.log_dir",
            "'/var/log/my logs': a Slurm config value cannot hold white space, '#' or control characters",
        ),
        problem(
            text,
            "NCCL_DEBUG",
            "nccl.env.NCCL_DEBUG",
            "'INFO\\nNCCL_X=1': an NCCL value cannot hold line breaks or control characters",
        ),
        problem(text, "    DEBUG: x", "nccl.env.DEBUG", "'DEBUG' is not an NCCL variable (NCCL_...)"),
    ]


def test_non_string_keys():
    text = BASE + "1: x\n"
    assert problems(text) == [problem(text, "1: x", "[1]", "Keys should be strings")]


def test_several_schema_problems_are_reported_together_in_line_order():
    text = edit(BASE, "cluster_name: test", "cluster_name: 1bad")
    text = edit(text, "    sockets: 2\n", "    sockets: 0\n")
    text = edit(text, "    default: true\n", "    default: sure\n")
    text = edit(text, "login: [head]", "login: [head, 'bad name']")
    assert problems(text) == [
        problem(
            text,
            "cluster_name",
            "cluster_name",
            "must be 1-40 lowercase letters, digits, '-' or '_', starting with a letter",
        ),
        problem(
            text,
            "login:",
            "login[1]",
            "must be a name of letters, digits, '.', '_' or '-', starting and ending with a letter or digit",
        ),
        problem(text, "sockets: 0", "node_groups[0].sockets", "Input should be greater than or equal to 1"),
        problem(
            text,
            "default: sure",
            "partitions[0].default",
            "Input should be a valid boolean, unable to interpret input",
        ),
    ]


# -- files -----------------------------------------------------------------------------------------


def test_load_cluster_reads_a_file_and_names_it(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text(edit(BASE, "login: [head]", "logn: [head]"))
    with pytest.raises(InventoryError) as caught:
        load_cluster(path)
    assert str(caught.value.problems[0]).startswith(f"{path}:11: logn: unknown field")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(InventoryError) as caught:
        load_cluster(path)
    assert [str(item) for item in caught.value.problems] == [
        f"{path}:1: (file): cannot read: No such file or directory"
    ]


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("cluster_name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InventoryError) as caught:
        load_cluster(path)
    assert [str(item) for item in caught.value.problems] == [f"{path}:1: (file): not UTF-8 text"]


def test_too_large(tmp_path):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:
        handle.truncate(MAX_INVENTORY_BYTES + 1)
    with pytest.raises(InventoryError) as caught:
        load_cluster(path)
    assert [str(item) for item in caught.value.problems] == [
        f"{path}:1: (file): larger than {MAX_INVENTORY_BYTES} bytes"
    ]


# -- error objects ---------------------------------------------------------------------------------


def test_problem_text_and_sorting():
    error = InventoryError(
        [Problem("b.yaml", 1, "x", "m"), Problem("a.yaml", 9, "y", "m"), Problem("a.yaml", 2, "z", "m")]
    )
    assert str(error) == "a.yaml:2: z: m\na.yaml:9: y: m\nb.yaml:1: x: m"


@pytest.mark.parametrize(
    ("location", "text"),
    [
        ((), "(top level)"),
        (("node_groups", 0, "gpus", "count"), "node_groups[0].gpus.count"),
        (("slurm", "conf", "kill-wait", "[key]"), "slurm.conf.kill-wait"),
        ((3,), "[3]"),
    ],
)
def test_format_location(location, text):
    assert format_location(location) == text


def test_load_cluster_text_uses_the_given_file_name():
    with pytest.raises(InventoryError) as caught:
        load_cluster_text("cluster_name: x\n", "some/where.yaml")
    assert all(item.file == "some/where.yaml" for item in caught.value.problems)


def test_unquoted_off_yes_and_no_are_taken_as_the_words_written():
    # YAML 1.1 reads them as booleans; the documented values are the words
    text = edit(BASE, "      type: a100\n", "      type: a100\n      autodetect: off\n")
    text = edit(text, "    default: true\n", "    default: true\n    oversubscribe: no\n")
    cluster = load_cluster_text(text, FILE)
    assert cluster.inventory.node_groups[0].gpus.autodetect == "off"
    assert cluster.inventory.partitions[0].oversubscribe == "NO"
    text = edit(BASE, "    default: true\n", "    default: true\n    oversubscribe: yes\n")
    assert load_cluster_text(text, FILE).inventory.partitions[0].oversubscribe == "YES"
    text = edit(BASE, "      type: a100\n", "      type: a100\n      autodetect: on\n")
    assert problems(text) == [
        problem(text, "autodetect: on", "node_groups[0].gpus.autodetect", "Input should be 'off' or 'nvml'")
    ]


def test_config_text_refuses_exactly_white_space_hash_and_unprintable_characters():
    # the check looks at the whole string at once (str.isprintable): each code point, as a check of
    # every character would see it
    refused = []
    for code in range(0x110000):
        char = chr(code)
        try:
            _check_config_text(f"a{char}b")
        except ValueError:
            refused.append(char)
    assert refused == [char for char in map(chr, range(0x110000))
                       if char.isspace() or char == "#" or not char.isprintable()]
