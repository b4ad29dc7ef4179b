"""Every command the README shows works as written: make targets exist, the programs it names
exist and can be run the way it runs them, and molecule runs without .venv/bin on PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
VENV_BIN = Path(sys.executable).parent


def commands() -> list[str]:
    """Shell commands in the README: lines of ```bash blocks and `inline` spans that start with a
    program of this repository (make, .venv/bin, scripts/, benchmarks/, molecule/, VAR=... prefix)."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.DOTALL):
        found += [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]
    found += re.findall(r"`((?:[A-Z_]+=\S+ )?(?:make |\.venv/|scripts/|benchmarks/|molecule/)[^`]*)`", README)
    return sorted(command for command in set(found) if not program(command).endswith("/"))  # not a folder


def program(command: str) -> str:
    words = [word for word in command.split() if not re.fullmatch(r"[A-Z_]+=\S*", word)]
    return words[0]


def test_the_readme_names_its_commands() -> None:
    assert {"make cluster", "make test", "scripts/molecule test -s ha"} <= set(commands())


@pytest.mark.parametrize("command", [c for c in commands() if c.startswith("make ")])
def test_every_make_command_is_a_makefile_target(command: str) -> None:
    targets = re.findall(r"^([a-z][\w-]*):", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert command.split()[1] in targets, f"README: '{command}' but the Makefile has no such target"


@pytest.mark.parametrize("command", [c for c in commands() if "/" in program(c)])
def test_every_program_the_readme_runs_exists_and_runs_as_written(command: str) -> None:
    name = program(command)
    path = VENV_BIN / name.removeprefix(".venv/bin/") if name.startswith(".venv/bin/") else REPO / name
    assert path.is_file(), f"README: '{command}' but {name} does not exist"
    assert os.access(path, os.X_OK), f"README: '{command}' runs {name} directly but it is not executable"
    words = command.split()
    for argument in words[words.index(name) + 1 :]:  # a script it hands to python must exist too
        if argument.endswith(".py"):
            assert (REPO / argument).is_file(), f"README: '{command}' but {argument} does not exist"


def test_molecule_runs_as_the_readme_shows_without_the_venv_on_path() -> None:
    if not (REPO / ".venv" / "bin" / "molecule").exists():
        pytest.skip("no .venv/bin/molecule in this checkout (make setup installs it)")
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    done = subprocess.run(
        ["scripts/molecule", "list"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "default" in done.stdout and "ha" in done.stdout
