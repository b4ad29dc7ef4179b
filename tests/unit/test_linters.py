"""ruff and mypy run where yamllint and ansible-lint run (issue 31 item 5): in CI's script before
pytest and in ``make lint``, pinned, and mypy over every folder of Python but the tests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
LINTERS = ["yamllint --strict .", "ansible-lint --profile production", "ruff check .", "mypy"]
# Run by pytest, each folder first on sys.path: docs/architecture.md, "Linters".
NOT_TYPE_CHECKED = ("tests", "molecule/tests")
NOT_SOURCE = {".venv", "build", "dist"}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_ci_runs_every_linter_before_pytest() -> None:
    lines = _lines((REPO / "scripts" / "test.sh").read_text(encoding="utf-8"))
    pytest_at = lines.index('python -m pytest "$@"')
    assert [lines.index(linter) for linter in LINTERS] == sorted(lines.index(linter) for linter in LINTERS)
    assert all(lines.index(linter) < pytest_at for linter in LINTERS)


def test_make_lint_runs_the_linters_ci_runs() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "the Makefile has no lint target"
    commands = [line.strip().removeprefix(".venv/bin/") for line in recipe.group(1).splitlines()]
    assert commands == [linter.replace("--strict", "-s") for linter in LINTERS]


def test_ruff_and_mypy_are_pinned_in_the_test_extra() -> None:
    test_extra = PYPROJECT["project"]["optional-dependencies"]["test"]
    pins = {re.split(r"[=<>]", requirement)[0]: requirement for requirement in test_extra}
    assert "==" in pins["ruff"] and "==" in pins["mypy"], pins


def test_mypy_checks_every_folder_of_python_but_the_tests() -> None:
    checked = PYPROJECT["tool"]["mypy"]["files"]
    assert PYPROJECT["tool"]["mypy"]["warn_unused_ignores"] is True
    missing = []
    for top in sorted(REPO.iterdir()):
        if top.name.startswith(".") or top.name in NOT_SOURCE or top.name.endswith(".egg-info"):
            continue
        for path in [top] if top.is_file() else sorted(top.rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name.endswith(".py") and not any(
                name == root or name.startswith(f"{root}/") for root in [*checked, *NOT_TYPE_CHECKED]
            ):
                missing.append(name)
    assert not missing, f"Python that mypy does not check: add its folder to [tool.mypy] files: {missing}"
