"""docs/inventory.md is generated from the model and must stay in step with it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from unit_helpers import REPO

from cluster_cli import loader
from cluster_cli.docs import EXAMPLE, REFUSED, generate, main, type_text, walk
from cluster_cli.errors import MAX_PROBLEMS_SHOWN
from cluster_cli.loader import load_cluster_text
from cluster_cli.model import Gpus, Inventory, NodeGroup, Partition

DOC = REPO / "docs" / "inventory.md"


def test_docs_inventory_md_is_in_step_with_the_model():
    assert DOC.read_text(encoding="utf-8") == generate(), (
        "docs/inventory.md is out of step with cluster_cli/model.py: run `python -m cluster_cli.docs` and commit it"
    )


def test_the_refused_section_states_the_limits_the_code_applies():
    text = " ".join(" ".join(REFUSED).split())
    assert f"over {loader.MAX_INVENTORY_BYTES // 2**20} MiB" in text
    assert f"nested more than {loader.MAX_NESTING} levels" in text
    assert f"more than {loader.MAX_ALIAS_EXPANSION:,} values" in text
    assert f"the first {MAX_PROBLEMS_SHOWN} problems" in text


def sections(text: str) -> dict[str, str]:
    found: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:]
            found[current] = ""
        elif current is not None:
            found[current] += line + "\n"
    return found


def test_every_model_and_field_is_documented_with_its_description():
    by_title = sections(generate())
    models = [cls for cls, _ in walk()]
    assert models[0] is Inventory
    assert {NodeGroup, Gpus, Partition} <= set(models)
    for cls in models:
        body = by_title["Top level" if cls is Inventory else cls.__name__]
        for name, field in cls.model_fields.items():
            assert field.description, f"{cls.__name__}.{name} has no description"
            (row,) = [line for line in body.splitlines() if line.startswith(f"| `{name}` |")]
            assert " ".join(field.description.split()) in row.replace("\\|", "|")


def test_required_fields_and_defaults():
    top = sections(generate())["Top level"]
    assert "| `cluster_name` | 1-40 of `a-z`, `0-9`, `-`, `_`, starting with a letter | **required** |" in top
    group = sections(generate())["NodeGroup"]
    assert "| `sockets` | integer, 1-64 | `1` |" in group
    assert "| `nodes` | hostlist | **required** |" in group
    assert "| `base_port` | port or null | `null` |" in group
    assert "| `gpus` | [Gpus](#gpus) or null | `null` |" in group
    assert "| `features` | list of name | `[]` |" in group
    assert "Used at: `node_groups[]`" in group


@pytest.mark.parametrize(
    ("annotation", "text"),
    [
        (Inventory.model_fields["node_groups"].annotation, "list of [NodeGroup](#nodegroup)"),
        (Gpus.model_fields["autodetect"].annotation, "one of `off`, `nvml`"),
        (dict[str, int], "map of string to integer"),
        (int | None, "integer or null"),
    ],
)
def test_type_names(annotation, text):
    assert type_text(annotation) == text


def test_the_example_is_a_valid_inventory():
    cluster = load_cluster_text(EXAMPLE, "docs example")
    assert len(cluster.nodes) == 4
    assert f"```yaml\n{EXAMPLE}```" in generate()


def test_check_mode(tmp_path, capsys):
    target = tmp_path / "inventory.md"
    assert main(["-o", str(target)]) == 0
    assert target.read_text() == generate()
    assert main(["--check", "-o", str(target)]) == 0
    target.write_text(generate() + "stale\n")
    assert main(["--check", "-o", str(target)]) == 1
    assert "out of step" in capsys.readouterr().err


def test_module_entry_point_prints_the_reference():
    result = subprocess.run(
        [sys.executable, "-m", "cluster_cli.docs", "-o", "-"], capture_output=True, text=True, check=True
    )
    assert result.stdout == generate()
