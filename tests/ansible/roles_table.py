"""Print the role variable table of docs/roles.md from the roles' defaults and argument specs.

    python tests/ansible/roles_table.py > /tmp/table.md   # then paste between the markers

test_role_interface.py checks that the table in docs/roles.md matches.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _whole_roles(play: dict) -> list[str]:
    """The roles a play applies whole, in its order: pre_tasks' include_role and import_role, roles,
    tasks' include_role and import_role (one with tasks_from runs one entry point, not the role)."""
    def included(tasks: list[dict]) -> list[str]:
        calls = [task.get("ansible.builtin.include_role") or task.get("ansible.builtin.import_role") for task in tasks]
        return [call["name"] for call in calls if call and "tasks_from" not in call]
    roles = [entry if isinstance(entry, str) else entry["role"] for entry in play.get("roles", [])]
    return included(play.get("pre_tasks", [])) + roles + included(play.get("tasks", []))


def deploy_roles() -> tuple[str, ...]:
    """The roles playbooks/site.yml applies, in the order its plays first name them."""
    roles: list[str] = []
    for play in yaml.safe_load((REPO / "playbooks" / "site.yml").read_text()):
        for name in _whole_roles(play):
            if name not in roles:
                roles.append(name)
    return tuple(roles)


ROLES = deploy_roles()


def cell(value: object) -> str:
    if isinstance(value, str):
        value = " ".join(value.split())
    # Plain text where YAML reads it back as the same string, JSON (valid YAML) otherwise.
    try:
        plain = isinstance(value, str) and value != "" and yaml.safe_load(value) == value
    except yaml.YAMLError:
        plain = False
    text = value if plain else json.dumps(value)
    return "`" + text.replace("|", "\\|") + "`"


def rows() -> list[str]:
    lines = ["| role | variable | default | meaning |", "|---|---|---|---|"]
    for role in ROLES:
        defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text()) or {}
        options = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
        for name in defaults:
            description = options[name]["description"]
            if isinstance(description, list):
                description = " ".join(description)
            meaning = " ".join(str(description).split()).replace("|", "\\|")
            lines.append(f"| {role} | `{name}` | {cell(defaults[name])} | {meaning} |")
    return lines


if __name__ == "__main__":
    print("\n".join(rows()))
