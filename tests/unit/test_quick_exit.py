"""The `cluster-cli` program ends a successful `validate` or `render` with os._exit, not the
interpreter's teardown, and loses nothing by it: the same output and files as `main` run in-process;
every other verb, and every error, exits as before, with its message and exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cluster_cli.cli import main

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / "inventories" / "local" / "inventory.yaml"

# the program as the console script runs it, with an exit handler that only the teardown runs
PROGRAM = """
import atexit, sys
atexit.register(lambda: sys.stderr.write("teardown ran\\n"))
from cluster_cli.cli import program
program()
"""


def run_program(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), XDG_STATE_HOME=str(state))
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, env=env, cwd=state.parent,
        check=False,
    )


def files_of(directory: Path) -> dict[str, bytes]:
    files = (path for path in directory.rglob("*") if not path.is_dir())
    return {str(path.relative_to(directory)): path.read_bytes() for path in files}


def test_render_exits_quickly_with_the_same_output_and_files(tmp_path, monkeypatch):
    build = tmp_path / "build"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    in_process = CliRunner().invoke(main, ["render", str(INVENTORY), "-o", str(build)])
    assert in_process.exit_code == 0, in_process.output
    expected = files_of(build)

    done = run_program("render", str(INVENTORY), "-o", str(build), state=tmp_path / "state")
    assert (done.returncode, done.stderr) == (0, "")  # no "teardown ran": os._exit
    assert done.stdout == in_process.stdout and done.stdout.count("\nwrote ") > 5
    assert files_of(build) == expected


def test_validate_exits_quickly_with_its_summary(tmp_path):
    done = run_program("validate", str(INVENTORY), state=tmp_path / "state")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"{INVENTORY}: cluster 'local' is valid: 3 nodes in 1 group")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["validate", "missing.yaml"], 2, "missing.yaml"),
        (["render", "missing.yaml", "-o", "build"], 2, "missing.yaml"),
        (["--version"], 0, ""),
        (["validate"], 2, "Missing argument 'INVENTORY'"),
    ],
)
def test_errors_and_other_verbs_exit_through_the_teardown(tmp_path, args, code, message):
    done = run_program(*args, state=tmp_path / "state")
    assert done.returncode == code
    assert message in done.stderr and done.stderr.endswith("teardown ran\n")
