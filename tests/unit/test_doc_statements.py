"""What the docs state that the tree can check: the ansible-core floor everywhere it is written, and
docs/architecture.md's flow (the deploy's steps, every file of the build directory). The modules and
plugins the roles need beside ansible.builtin (docs/roles.md) are checked with the roles, in
tests/ansible/test_role_interface.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from unit_helpers import REPO, SHIPPED_INVENTORIES

from cluster_cli.build import write_build
from cluster_cli.loader import load_cluster
from cluster_cli.render import BUILD_MARKER, KEPT_DIRS

# The deploy's steps, in the order it runs them (cluster_cli/deploy.py and the deploy verb).
DEPLOY_STEPS = ("validate", "secrets", "render", "probe", "retire", "playbook", "record")
STEP = re.compile(r"^(\d) (\w+) ")


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
    runtime = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())  # the collection's
    assert runtime["requires_ansible"] == f">={floor}.0", runtime
    assert f"Control node: ansible-core >= {floor} " in (REPO / "docs" / "roles.md").read_text()


def flow() -> str:
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("\n## Flow\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def test_the_flow_names_the_deploys_steps_in_order_and_their_modules_exist() -> None:
    lines = flow().splitlines()
    steps = [match.groups() for match in map(STEP.match, lines) if match]
    assert steps == [(str(number), step) for number, step in enumerate(DEPLOY_STEPS, 1)]
    steps_text = flow().split("BUILD_DIR/", 1)[0]
    modules = re.findall(r"\b\w+\.py\b", steps_text)
    packages = re.findall(r"\b(\w+)/\*", steps_text) + re.findall(r"\((\w+)/\)", steps_text)
    assert {"model.py", "plan.py", "deployed.py"} <= set(modules) and {"render", "probe"} <= set(packages)
    for module in modules:
        assert (REPO / "cluster_cli" / module).is_file(), f"the flow cites cluster_cli/{module}, which is not there"
    for package in packages:
        assert (REPO / "cluster_cli" / package).is_dir(), f"the flow cites cluster_cli/{package}/, which is not there"


def written_by_the_code() -> set[str]:
    """The files the code writes into BUILD_DIR/ansible/ outside a render (deploy, upgrade)."""
    sources = " ".join(path.read_text() for path in sorted((REPO / "cluster_cli").rglob("*.py")))
    return {f"ansible/{name}" for name in re.findall(r"/ \"ansible\" / \"([\w.]+)\"", sources)}


@pytest.mark.parametrize("inventory", ["local", "gpu-cluster"])
def test_the_flow_lists_every_file_of_the_build_directory(inventory: str, tmp_path: Path) -> None:
    build = write_build(load_cluster(SHIPPED_INVENTORIES[inventory]), tmp_path / "build", tmp_path / "secrets")
    rendered = {file.path for file in build.files}
    assert {"ansible/retired.yml", "ansible/run_vars.yml"} <= written_by_the_code(), "the search found them"
    listing = flow().split("BUILD_DIR/", 1)[1].split("SECRETS_DIR/", 1)[0]
    words = set(re.findall(r"[\w.-]+/?", listing))
    for path in sorted(rendered | written_by_the_code()):
        *folders, name = path.split("/")
        assert all(f"{folder}/" in words for folder in folders) and name in words, (
            f"docs/architecture.md's BUILD_DIR lacks {path}")
    assert BUILD_MARKER in words
    assert {f"{kept}/" for kept in KEPT_DIRS} <= words


def site_roles() -> set[str]:
    """The roles playbooks/site.yml runs (import_role and include_role, in any play's task list)."""
    plays = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
    tasks = [task for play in plays for part in ("pre_tasks", "tasks", "post_tasks") for task in play.get(part) or []]
    calls = [task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role") for task in tasks]
    return {call["name"] for call in calls if call}


def test_no_doc_says_a_role_site_yml_runs_is_not_wired_into_deploy() -> None:
    roles = {path.name for path in (REPO / "roles").iterdir() if path.is_dir()}
    assert {"nvidia", "nccl", "slurm_build"} <= site_roles() <= roles
    texts = {path: path.read_text() for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]}
    for path, text in texts.items():
        for match in re.finditer(r"not (?:yet )?wired", text):
            before = text[max(0, text.rfind("\n\n", 0, match.start()), match.start() - 160):match.start()]
            named = set(re.findall(r"\w+", before)) & site_roles()
            assert not named, f"{path.name} says {sorted(named)} are not wired, but site.yml runs them"
