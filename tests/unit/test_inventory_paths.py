"""Paths in the inventory: absolute, no '.' or '..' parts, and never a system directory where
the deploy chowns or teardown --purge deletes."""

from __future__ import annotations

from pathlib import Path

import pytest

from unit_helpers import BASE, load, problem, problems

from cluster_cli.build import secrets_dir_for
from cluster_cli.model import SYSTEM_DIRS

SYSTEM = (
    "is a system directory: the deploy would take it over (chown) and teardown --purge would delete it; "
    "use a directory of its own below it"
)
OWNED_DIRS = [
    ("slurm", "paths", "conf_dir"),
    ("slurm", "paths", "state_dir"),
    ("slurm", "paths", "spool_dir"),
    ("slurm", "paths", "log_dir"),
    ("slurm", "paths", "run_dir"),
    ("training", "venv_path"),
    ("training", "work_dir"),
    ("secrets", "dir"),
]


def with_value(path: tuple[str, ...], value: str) -> str:
    """BASE with ``value`` (written as a YAML double-quoted string) at ``path``."""
    text = BASE
    for depth, key in enumerate(path[:-1]):
        text += "  " * depth + f"{key}:\n"
    return text + "  " * (len(path) - 1) + f'{path[-1]}: "{value}"\n'


def test_the_issues_relative_state_dir_is_refused():
    text = with_value(("slurm", "paths", "state_dir"), "../../etc")
    assert problems(text) == [
        problem(text, "state_dir:", "slurm.paths.state_dir", "'../../etc' is not an absolute path")
    ]


@pytest.mark.parametrize("path", OWNED_DIRS, ids=".".join)
@pytest.mark.parametrize("value", ["/", "/etc", "/var/log/", "//var//lib", "/home", "/tmp"])
def test_a_system_directory_is_refused_where_the_deploy_owns_the_directory(path, value):
    text = with_value(path, value)
    assert problems(text) == [problem(text, f"{path[-1]}:", ".".join(path), f"{value!r} {SYSTEM}")]


@pytest.mark.parametrize("system", sorted(SYSTEM_DIRS))
def test_every_listed_system_directory_is_refused(system):
    text = with_value(("slurm", "paths", "log_dir"), system)
    assert problems(text) == [problem(text, "log_dir:", "slurm.paths.log_dir", f"{system!r} {SYSTEM}")]


@pytest.mark.parametrize("path", OWNED_DIRS, ids=".".join)
@pytest.mark.parametrize("value", ["/var/lib/slurm/../../../etc", "/srv/./x"])
def test_dot_and_dot_dot_parts_are_refused(path, value):
    text = with_value(path, value)
    assert problems(text) == [
        problem(text, f"{path[-1]}:", ".".join(path), f"{value!r}: a path cannot hold '.' or '..' parts")
    ]


@pytest.mark.parametrize(
    "path",
    [*OWNED_DIRS, ("ssh", "private_key"), ("training", "python"), ("hosts", "python")],
    ids=".".join,
)
def test_a_relative_path_is_refused(path):
    if path == ("hosts", "python"):
        text = BASE.replace("    address: 10.0.0.1\n", "    address: 10.0.0.1\n    python: bin/python3\n", 1)
        expected = [problem(text, "python: bin/python3", "hosts[0].python", "'bin/python3' is not an absolute path")]
    else:
        text = with_value(path, "state/x")
        expected = [problem(text, f"{path[-1]}:", ".".join(path), "'state/x' is not an absolute path")]
    assert problems(text) == expected


@pytest.mark.parametrize("path", OWNED_DIRS, ids=".".join)
def test_a_directory_below_a_system_directory_is_fine(path):
    assert problems(with_value(path, "/var/lib/cluster-x")) == []


def test_control_node_paths_may_start_with_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    text = with_value(("secrets", "dir"), "~/cluster-secrets") + 'ssh:\n  private_key: "~/.ssh/key"\n'
    cluster = load(text)
    assert secrets_dir_for(cluster, Path("/elsewhere/inv.yaml")) == tmp_path / "cluster-secrets"


@pytest.mark.parametrize("value", ["~", "~/", "~/..", "secrets"])
def test_the_secrets_directory_is_not_the_home_directory_nor_relative(value):
    assert [line.split(": ", 2)[1] for line in problems(with_value(("secrets", "dir"), value))] == ["secrets.dir"]
