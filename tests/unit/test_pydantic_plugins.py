"""cluster_cli.pydantic_plugins: pydantic's plugin lookup skipped without importlib.metadata, answered
as pydantic answers it with PYDANTIC_DISABLE_PLUGINS=__all__, and a pydantic change only loses the
gain: each case runs in a fresh interpreter, as the CLI does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventories" / "local" / "inventory.yaml"


def run(program: str, **environment: str) -> dict:
    """The JSON a program prints last, run in a fresh interpreter with this checkout first."""
    env = {name: value for name, value in os.environ.items() if name != "PYDANTIC_DISABLE_PLUGINS"}
    env.update(PYTHONPATH=str(REPO), **environment)
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


LOAD = """
import inspect, json, sys
{before}
from cluster_cli.loader import load_cluster
cluster = load_cluster({inventory!r})
loader = sys.modules["pydantic.plugin._loader"]
print(json.dumps({{
    "nodes": len(cluster.nodes),
    "stand_in": type(loader).__name__ == "_NoPlugins",
    "metadata": "importlib.metadata" in sys.modules,
    "plugins": list(loader.get_plugins()),
    "parameters": list(inspect.signature(loader.get_plugins).parameters),
}}))
"""


SKIP = "from cluster_cli.pydantic_plugins import skip_plugin_lookup; skip_plugin_lookup()"


def load(before: str, **environment: str) -> dict:
    return run(LOAD.format(before=before, inventory=str(INVENTORY)), **environment)


def test_the_models_build_without_importlib_metadata_and_without_plugins():
    found = load(SKIP)
    assert found["stand_in"] and not found["metadata"]
    assert found["nodes"] > 0 and found["plugins"] == []


def test_the_stand_in_answers_as_pydantic_does_with_its_plugins_disabled():
    skipped = load(SKIP)
    disabled = load("", PYDANTIC_DISABLE_PLUGINS="__all__")
    assert not disabled["stand_in"] and disabled["metadata"]  # pydantic's own module, with its import
    assert (skipped["plugins"], skipped["parameters"]) == (disabled["plugins"], disabled["parameters"])


def test_any_other_name_brings_in_pydantics_own_module():
    found = run("""
import json, sys
from cluster_cli.pydantic_plugins import skip_plugin_lookup
skip_plugin_lookup()
from pydantic.plugin._loader import PYDANTIC_ENTRY_POINT_GROUP
from cluster_cli.model import Inventory
loader = sys.modules["pydantic.plugin._loader"]
print(json.dumps({"group": PYDANTIC_ENTRY_POINT_GROUP, "loader": type(loader).__name__}))
""")
    assert found == {"group": "pydantic", "loader": "module"}


def test_nothing_is_replaced_once_pydantics_module_is_loaded():
    found = load(f"import pydantic.plugin._loader\n{SKIP}")
    assert not found["stand_in"] and found["nodes"] > 0


def test_nothing_is_replaced_outside_pydantic_2():
    # a pydantic whose version says 3: its private modules may be another shape
    found = load(
        "import types; sys.modules['pydantic.version'] = types.SimpleNamespace(VERSION='3.0.0')\n"
        f"{SKIP}\ndel sys.modules['pydantic.version']"
    )
    assert not found["stand_in"] and found["nodes"] > 0
