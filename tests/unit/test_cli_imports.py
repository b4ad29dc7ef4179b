"""Each verb imports only what it needs (issue 17 item 5: start-up counts in every command's time):
`--version` and `--help` load neither pydantic nor YAML nor rich, and `validate` and `render` none of
the deploy, probe, smoke or terminal machinery. Which modules load is checked, not how long it takes:
the time is benchmarks/render_scale.py's business."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventories" / "local" / "inventory.yaml"

# what a run of `cluster-cli ARGS` in a fresh interpreter leaves in sys.modules
PROGRAM = """
import json, sys
from cluster_cli.cli import main
try:
    main(sys.argv[1:], prog_name="cluster-cli")
except SystemExit as stop:
    if stop.code not in (0, None):
        raise
print(json.dumps(sorted(sys.modules)))
"""

NEVER_AT_START = ("pydantic", "pydantic_core", "yaml", "rich", "ansible", "jinja2")
NOT_FOR_RENDER = (
    "rich",
    "ansible",
    "cluster_cli.deploy",
    "cluster_cli.plan",
    "cluster_cli.probe",
    "cluster_cli.progress",
    "cluster_cli.smoke",
    "cluster_cli.smoke_control",
    "cluster_cli.status",
    "cluster_cli.upgrade",
    "cluster_cli.node_lifecycle",
    "importlib.metadata",  # pydantic's plugin lookup (cluster_cli/pydantic_plugins.py)
)


def modules_after(*args: str, tmp_path: Path) -> set[str]:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"), PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, env=env, cwd=tmp_path, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(name for name in modules if name.split(".")[0] in packages or name.startswith(packages))


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["render", "--help"]])
def test_start_up_loads_no_heavy_package(args, tmp_path):
    modules = modules_after(*args, tmp_path=tmp_path)
    assert "cluster_cli.cli" in modules
    assert loaded(modules, NEVER_AT_START) == []


@pytest.mark.parametrize("verb", ["validate", "render"])
def test_validate_and_render_load_no_deploy_machinery(verb, tmp_path):
    extra = ["-o", str(tmp_path / "build")] if verb == "render" else []
    modules = modules_after(verb, str(INVENTORY), *extra, tmp_path=tmp_path)
    assert "cluster_cli.loader" in modules  # the verb did run
    assert loaded(modules, NOT_FOR_RENDER) == []


def test_no_model_field_has_a_builtin_default_factory():
    # pydantic reads each default_factory's signature while it builds the model classes, at every
    # start-up; a builtin's (list, dict) it parses from text, 0.1-0.3 ms a field: model.new_list instead
    import inspect

    from cluster_cli.model import Inventory, models_in

    seen, pending, builtins = set(), [Inventory], []
    while pending:
        model = pending.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, field in model.model_fields.items():
            if inspect.isbuiltin(field.default_factory) or field.default_factory in (list, dict, set, tuple):
                builtins.append(f"{model.__name__}.{name}")
            pending.extend(models_in(field.annotation))
    assert len(seen) > 20 and builtins == []
