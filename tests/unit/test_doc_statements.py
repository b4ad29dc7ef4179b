"""What the docs state that the tree can check: the ansible-core floor everywhere it is written. The
modules and plugins the roles need beside ansible.builtin (docs/roles.md) are checked with the
roles, in tests/ansible/test_role_interface.py."""

from __future__ import annotations

import re
import tomllib

import yaml
from unit_helpers import REPO


def ansible_core_floor() -> str:
    """The lowest ansible-core pyproject.toml lets pip install."""
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (requirement,) = [entry for entry in dependencies if re.match(r"ansible-core\b", entry)]
    return re.search(r">=\s*([0-9.]+)", requirement).group(1)


def test_the_ansible_core_floor_is_pyprojects_everywhere() -> None:
    floor = ansible_core_floor()
    plays = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    (check,) = [task["ansible.builtin.assert"] for task in plays[0]["tasks"] if task["name"] == "Check the Ansible version"]
    assert check["that"] == f"ansible_version.full is version('{floor}', '>=')"
    assert check["fail_msg"].startswith(f"ansible-core {floor} or newer is required")
    for meta in sorted((REPO / "roles").glob("*/meta/main.yml")):
        assert yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"] == floor, meta
    assert f"Control node: ansible-core >= {floor} " in (REPO / "docs" / "roles.md").read_text()
