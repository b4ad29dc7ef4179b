"""The GPU roles follow the repository's role conventions (static checks, no Ansible run)."""

from __future__ import annotations

import pytest
import yaml
from gpu_roles_helpers import REPO

ROLES = ("slurm_build", "nvidia", "nccl")


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_specs_are_exactly_in_step(role: str) -> None:
    defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options), (
        f"defaults and argument_specs differ: {set(defaults) ^ set(options)}"
    )
    for name, option in options.items():
        assert not option.get("required"), f"{name}: a default and a preflight check instead of required"
        assert option.get("default") == defaults[name], (
            f"{name}: {option.get('default')!r} != {defaults[name]!r}"
        )
        assert name.startswith(f"{role}_"), f"{name} lacks the {role}_ prefix"
        assert option.get("description"), f"{name} has no description"


@pytest.mark.parametrize("role", ROLES)
def test_main_imports_the_four_phases_tagged(role: str) -> None:
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks" / "main.yml").read_text())
    phases = ["preflight", "install", "configure", "run"]
    assert [task["ansible.builtin.import_tasks"] for task in tasks] == [f"{phase}.yml" for phase in phases]
    assert [task["tags"] for task in tasks] == [[phase, role] for phase in phases]


@pytest.mark.parametrize("role", ROLES)
def test_private_variables_and_templates(role: str) -> None:
    private = yaml.safe_load((REPO / "roles" / role / "vars" / "main.yml").read_text()) or {}
    assert all(name.startswith(f"__{role}_") for name in private), sorted(private)
    for template in sorted((REPO / "roles" / role).glob("templates/*.j2")):
        assert template.read_text().startswith("{{ ansible_managed | comment }}\n"), template.name


@pytest.mark.parametrize("role", ROLES)
def test_only_builtin_modules(role: str) -> None:
    for path in sorted((REPO / "roles" / role).glob("*/*.yml")):
        if path.parent.name not in ("tasks", "handlers"):
            continue
        for task in yaml.safe_load(path.read_text()) or []:
            for item in [task, *task.get("block", []), *task.get("rescue", []), *task.get("always", [])]:
                modules = [key for key in item if "." in key]
                assert all(key.startswith("ansible.builtin.") for key in modules), f"{path.name}: {modules}"
