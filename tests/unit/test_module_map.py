"""docs/architecture.md's module map is true: every module of cluster_cli/ is in it, and each
imports only what its row allows (the smoke package nothing outside itself: it runs on hosts)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "cluster_cli"
ROW = re.compile(r"^\| `([^`]+)` \| (.+?) \| (.+?) \|$")


def module_map() -> dict[str, set[str] | None]:
    """Row name (``cli``, ``render/*``) -> the cluster_cli modules it may import (None: any)."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str] | None] = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match and match.group(1) != "module":
            allowed = match.group(3)
            rows[match.group(1)] = None if "everything" in allowed else set(re.findall(r"`([^`]+)`", allowed))
    return rows


def module_name(path: Path) -> str:
    return str(path.relative_to(PACKAGE).with_suffix("")).removesuffix("/__init__")


def row_of(name: str, rows: dict[str, set[str] | None]) -> str | None:
    if name in rows:
        return name
    package = name.split("/")[0]
    if f"{package}/*" in rows:
        return f"{package}/*"
    if name == package:  # a package's __init__: covered by the rows of its modules
        return next((row for row in rows if row.startswith(f"{package}/")), None)
    return None


def imported_modules(path: Path) -> set[str]:
    """The cluster_cli modules ``path`` imports, as map names (``render``, ``smoke.suite``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cluster_cli"):
            inner = node.module.removeprefix("cluster_cli").lstrip(".")
            if inner:
                found.add(inner)
            else:  # from cluster_cli import hostlist / __version__
                found.update(alias.name for alias in node.names if (PACKAGE / f"{alias.name}.py").exists())
        elif isinstance(node, ast.Import):
            found.update(
                alias.name.removeprefix("cluster_cli.") for alias in node.names if alias.name.startswith("cluster_cli.")
            )
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", MODULES, ids=[module_name(p) or "__init__" for p in MODULES])
def test_every_module_is_in_the_map_and_imports_only_what_its_row_allows(path: Path) -> None:
    rows = module_map()
    name = module_name(path)
    if name in ("", "__init__"):
        return  # the package's own __init__ (its version) is importable by all
    row = row_of(name, rows)
    assert row is not None, f"cluster_cli/{name} is not in docs/architecture.md's module map"
    allowed = rows[row]
    if allowed is None:
        return
    own = name.split("/")[0]
    for imported in imported_modules(path):
        top = imported.split(".")[0]
        if top == own:
            continue  # a package's modules use each other
        assert imported in allowed or top in allowed, (
            f"cluster_cli/{name} imports cluster_cli.{imported}; its row allows only {sorted(allowed)}"
        )


def test_the_smoke_package_imports_of_cluster_cli_only_what_its_copy_carries() -> None:
    from cluster_cli.smoke_control.remote import CARRIED_MODULES

    carried = {module.removesuffix(".py") for module in CARRIED_MODULES}
    for path in (PACKAGE / "smoke").glob("*.py"):
        outside = {name for name in imported_modules(path) if not name.startswith("smoke") and name not in carried}
        assert not outside, f"{path.name} imports {outside}: the smoke package runs on hosts without them"


def test_every_row_of_the_map_names_a_module_that_exists() -> None:
    for row in module_map():
        base = row.removesuffix("/*")
        exists = (PACKAGE / f"{base}.py").is_file() or (PACKAGE / base / "__init__.py").is_file()
        assert exists, f"docs/architecture.md's module map names cluster_cli/{row}, which does not exist"


def test_no_two_modules_share_a_name() -> None:
    """A name means one thing: `errors` is not also the smoke package's, `nodes` not also resolve's."""
    by_name: dict[str, list[str]] = {}
    for path in MODULES:
        if path.stem not in ("__init__", "__main__"):
            by_name.setdefault(path.stem, []).append(module_name(path))
    repeated = {name: places for name, places in by_name.items() if len(places) > 1}
    assert not repeated, f"module names used more than once: {repeated}"
