"""Static checks of the deploy roles' interface and conventions (no Ansible run).

The variable table of docs/roles.md is what cluster-cli generates cluster_vars.yml from, so it is
checked against the roles' defaults here too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.playbook.task import Task
from roles_table import ROLES as DEPLOY_ROLES

REPO = Path(__file__).resolve().parents[2]
# Roles of entry points other roles include (tasks_from): no defaults, no phases, never applied.
LIBRARIES = ("daemon",)
# Every role of the tree: the deploy roles site.yml applies and the GPU roles (slurm_build, nvidia, nccl).
ROLES = tuple(sorted(path.name for path in (REPO / "roles").iterdir() if path.is_dir() and path.name not in LIBRARIES))
# Not yet held to the backslash rules below: slurm_build still writes regexes inside Jinja (build_debian.yml:
# the nvml.h match, the contents check); its build runs only with CLUSTER_CLI_SLOW_TESTS=1, so it is changed
# when that run can prove the change.
BACKSLASH_RULES = tuple(role for role in ROLES if role != "slurm_build") + LIBRARIES
PHASES = ("preflight", "install", "configure", "run")
# Names shared across roles and fixed by docs/architecture.md, exempt from the role prefix.
SHARED = {"cluster_service_manager"}


def load(path: Path) -> object:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def defaults(role: str) -> dict:
    return load(REPO / "roles" / role / "defaults" / "main.yml") or {}


def specs(role: str) -> dict:
    return load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_main_argument_spec_are_exactly_in_step(role: str) -> None:
    values = defaults(role)
    options = specs(role)["main"]["options"]
    assert set(values) == set(options), f"only in defaults or specs: {sorted(set(values) ^ set(options))}"
    for name, option in options.items():
        assert not option.get("required"), f"{name}: required options have no default; use a default and a preflight check"
        assert option.get("default") == values[name], f"{name}: spec {option.get('default')!r} != defaults {values[name]!r}"
        assert option.get("description"), f"{name}: no description"
        assert name in SHARED or name.startswith(f"{role}_"), f"{name} lacks the {role}_ prefix"


@pytest.mark.parametrize("role", ROLES)
def test_other_entry_points_agree_with_defaults(role: str) -> None:
    values = defaults(role)
    for entry, spec in specs(role).items():
        for name, option in (spec.get("options") or {}).items():
            assert name in values, f"{entry}: {name} is not a default of the role"
            assert option.get("default") == values[name], f"{entry}: {name} default differs from defaults/main.yml"
        if entry != "main":
            assert (REPO / "roles" / role / "tasks" / f"{entry}.yml").is_file(), f"entry point {entry} has no tasks file"


@pytest.mark.parametrize("role", ROLES)
def test_main_imports_the_four_phases_tagged(role: str) -> None:
    tasks = load(REPO / "roles" / role / "tasks" / "main.yml")
    assert [task["ansible.builtin.import_tasks"] for task in tasks] == [f"{phase}.yml" for phase in PHASES]
    assert [task["tags"] for task in tasks] == [[phase, role] for phase in PHASES]


@pytest.mark.parametrize("role", ROLES + LIBRARIES)
def test_private_variables_and_templates(role: str) -> None:
    # roles/daemon has none: a handler includes its files by path, where a role's vars are not loaded.
    path = REPO / "roles" / role / "vars" / "main.yml"
    private = (load(path) if path.exists() or role not in LIBRARIES else None) or {}
    assert all(name.startswith(f"__{role}_") for name in private), sorted(private)
    for template in sorted((REPO / "roles" / role).glob("templates/*.j2")):
        assert template.read_text(encoding="utf-8").startswith("{{ ansible_managed | comment }}\n"), template.name


def task_items(tasks: list[dict] | None):
    """Each task, and each task inside a block's block, rescue and always, at any depth."""
    for task in tasks or []:
        yield task
        for part in ("block", "rescue", "always"):
            yield from task_items(task.get(part))


def tasks_of(role: str):
    for path in sorted((REPO / "roles" / role).glob("*/*.yml")):
        if path.parent.name in ("tasks", "handlers"):
            for task in task_items(load(path)):
                yield path, task


def playbook_tasks():
    """The tasks of playbooks/: a playbook's plays (pre_tasks, tasks, post_tasks, handlers), or a
    file of tasks its plays include."""
    for path in sorted((REPO / "playbooks").rglob("*.yml")):
        document = load(path) or []
        plays = [entry for entry in document if "hosts" in entry] or [{"tasks": document}]
        for play in plays:
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                for task in task_items(play.get(section)):
                    yield path, task


# What is not one of these keys of a task is the module (or action) it runs.
TASK_KEYWORDS = set(Task.fattributes) | {"listen", "block", "rescue", "always"}
# The collection's own modules and actions (galaxy.yml: cluster_cli.slurm), called by their fully qualified names.
COLLECTION = "cluster_cli.slurm"
PROJECT_MODULES = {f"{COLLECTION}.{path.stem}" for folder in ("plugins/modules", "plugins/action")
                   for path in (REPO / folder).glob("*.py")}
PLUGIN_FOLDERS = ("plugins/modules", "plugins/action", "plugins/lookup", "plugins/filter")
LOOKUP = re.compile(r"\b(?:lookup|query|q)\(\s*['\"]([\w.]+)['\"]")


def module_of(path: Path, task: dict) -> str | None:
    modules = [key for key in task if key not in TASK_KEYWORDS and not key.startswith("with_")]
    assert len(modules) <= 1, f"{path.relative_to(REPO)}: {task.get('name')}: {modules}"
    return modules[0] if modules else None


def used_modules() -> set[str]:
    """The modules and actions the tasks of every role and playbook run."""
    tasks = [*(item for role in ROLES + LIBRARIES for item in tasks_of(role)), *playbook_tasks()]
    return {module_of(path, task) for path, task in tasks} - {None}


def used_lookups() -> set[str]:
    """The lookup plugins the roles and playbooks call (lookup, query, q)."""
    texts = [path.read_text() for folder in ("roles", "playbooks") for path in sorted((REPO / folder).rglob("*.yml"))]
    return {name for text in texts for name in LOOKUP.findall(text)}


def test_modules_are_ansible_builtin_or_the_projects_own() -> None:
    used = used_modules()
    assert {"ansible.builtin.command", f"{COLLECTION}.cluster_files", f"{COLLECTION}.cluster_packages"} <= used, \
        "the walk found the tasks"
    others = sorted(name for name in used if not name.startswith("ansible.builtin.") and name not in PROJECT_MODULES)
    assert not others, f"modules neither ansible.builtin nor in plugins/modules/ or plugins/action/: {others}"


def test_lookups_are_ansible_builtin_or_the_projects_own() -> None:
    own = {f"{COLLECTION}.{path.stem}" for path in (REPO / "plugins" / "lookup").glob("*.py")}
    used = used_lookups()
    assert {f"{COLLECTION}.role_template", "ansible.builtin.file"} <= used, "the search found the lookups"
    others = sorted(name for name in used if not name.startswith("ansible.builtin.") and name not in own)
    assert not others, f"lookups neither ansible.builtin nor in plugins/lookup/: {others}"


def test_roles_md_names_the_project_plugins_the_tree_holds_and_the_roles_use() -> None:
    """docs/roles.md's requirements say which modules and plugins the roles need beside ansible.builtin."""
    text = (REPO / "docs" / "roles.md").read_text(encoding="utf-8")
    requirements = text.split("- Control node:", 1)[1].split("\n- ", 1)[0]
    named = set(re.findall(rf"`((?:{'|'.join(PLUGIN_FOLDERS)})/\w+\.py)`", requirements))
    held = {str(path.relative_to(REPO)) for folder in PLUGIN_FOLDERS for path in (REPO / folder).glob("*.py")}
    assert named == held, f"only in docs/roles.md: {sorted(named - held)}; only in the tree: {sorted(held - named)}"
    called = used_modules() | used_lookups()
    unused = [path for path in sorted(held)
              if not path.startswith("plugins/filter/") and f"{COLLECTION}.{Path(path).stem}" not in called]
    assert not unused, f"documented and shipped, but no task uses them: {unused}"


def test_every_task_touching_the_database_password_is_no_log() -> None:
    secret = re.compile(r"slurmdbd_storage_pass|__slurmdbd_sql_pass|slurmdbd\.conf")
    for role in ROLES + LIBRARIES:
        for path, task in tasks_of(role):
            if "block" in task:  # its tasks are checked one by one
                continue
            body = yaml.safe_dump({key: value for key, value in task.items() if key != "name"})
            if secret.search(body) and "ansible.builtin.assert" not in task or "StoragePass" in body:
                assert task.get("no_log") is True, f"{path}: {task.get('name')} handles the password without no_log"


def test_slurmdbd_conf_copy_shows_no_diff() -> None:
    copies = [task for path, task in tasks_of("slurmdbd") if "slurmdbd.conf" in str(task.get("ansible.builtin.copy", {}))]
    assert copies and all(task.get("diff") is False and task.get("no_log") is True for task in copies)


def test_docs_table_lists_every_variable_with_its_default() -> None:
    text = (REPO / "docs" / "roles.md").read_text(encoding="utf-8")
    rows = {}
    for line in text.splitlines():
        if not line.startswith("| "):
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cells) == 4 and cells[1].startswith("`"):
            rows[cells[1].strip("`")] = (cells[0], cells[2])
    for role in DEPLOY_ROLES:
        for name, value in defaults(role).items():
            assert name in rows, f"docs/roles.md has no row for {name}"
            assert rows[name][0] == role, f"{name}: documented under {rows[name][0]}, defined in {role}"
            shown = yaml.safe_load(rows[name][1].strip("`"))
            if isinstance(value, str):
                value = " ".join(value.split())
            assert shown == value, f"{name}: docs {rows[name][1]} != {value!r}"


def test_no_backslash_inside_jinja_expressions() -> None:
    # ansible-core 2.19 keeps backslashes of Jinja string literals as they are, older versions
    # decode them as escapes: a regex or SQL escape written there means different things. Backslashes
    # come from YAML strings (variables) instead.
    expression = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
    for role in BACKSLASH_RULES:
        for path in sorted((REPO / "roles" / role).rglob("*.yml")) + sorted((REPO / "roles" / role).rglob("*.j2")):
            for match in expression.finditer(path.read_text(encoding="utf-8")):
                text = match.group(0)
                assert "\\" not in text, f"{path.relative_to(REPO)}: backslash in {match.group(0)[:80]!r}"


def test_no_backslash_in_bare_conditionals() -> None:
    keys = {"when", "that", "until", "changed_when", "failed_when"}

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in keys:
                    assert "\\" not in yaml.safe_dump(value), f"{where}: backslash in {key}: {value!r}"
                walk(value, where)
        elif isinstance(node, list):
            for item in node:
                walk(item, where)

    for role in BACKSLASH_RULES:
        for path, task in tasks_of(role):
            walk(task, f"{path.relative_to(REPO)}: {task.get('name')}")


def includes_of(library: str):
    """(file, task) for every include_role/import_role of ``library`` in the roles and playbooks."""
    files = sorted((REPO / "roles").glob("*/tasks/*.yml")) + sorted((REPO / "roles").glob("*/handlers/*.yml"))
    for path in files + sorted((REPO / "playbooks").glob("**/*.yml")):
        def walk(items):
            for item in items or []:
                if isinstance(item, dict):
                    yield item
                    for section in ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"):
                        yield from walk(item.get(section))
        for item in walk(load(path)):
            call = item.get("ansible.builtin.include_role") or item.get("ansible.builtin.import_role")
            if call and call.get("name") == library:
                yield path, item


@pytest.mark.parametrize("library", LIBRARIES)
def test_library_entry_points_have_specs_and_main_refuses_to_run(library: str) -> None:
    entries = specs(library)
    assert not (REPO / "roles" / library / "defaults").exists(), "a library role takes parameters, not defaults"
    assert entries["main"].get("options") == {}
    (main,) = load(REPO / "roles" / library / "tasks" / "main.yml")
    assert "ansible.builtin.fail" in main
    for entry in entries:
        assert (REPO / "roles" / library / "tasks" / f"{entry}.yml").is_file(), f"entry point {entry} has no tasks file"
    for entry, spec in entries.items():
        for name, option in (spec.get("options") or {}).items():
            assert name == library or name.startswith(f"{library}_"), f"{entry}: {name} lacks the {library}_ prefix"
            assert option.get("description"), f"{entry}: {name} has no description"


@pytest.mark.parametrize("library", LIBRARIES)
def test_every_include_of_a_library_passes_its_entry_points_options(library: str) -> None:
    """Each include names an entry point, passes only its options (and the including role's private
    variables), skips Ansible's per-host argument check, and a literal option dict has the keys the
    spec requires and no other."""
    entries = specs(library)
    found = list(includes_of(library))
    assert found, f"no role includes {library}"
    for path, task in found:
        where = f"{path.relative_to(REPO)}: {task.get('name')}"
        call = task.get("ansible.builtin.include_role") or task.get("ansible.builtin.import_role")
        entry = call.get("tasks_from")
        assert entry in entries and entry != "main", f"{where}: no entry point {entry!r}"
        assert call.get("rolespec_validate") is False, f"{where}: without rolespec_validate: false"
        options = entries[entry].get("options") or {}
        given = {name for name in task.get("vars") or {} if not name.startswith("__")}
        assert given <= set(options), f"{where}: unknown options {sorted(given - set(options))}"
        required = {name for name, option in options.items() if option.get("required")}
        assert required <= given, f"{where}: missing options {sorted(required - given)}"
        for name, value in (task.get("vars") or {}).items():
            suboptions = options.get(name, {}).get("options")
            if suboptions and isinstance(value, dict):
                assert set(value) <= set(suboptions), f"{where}: {name} has unknown keys {sorted(set(value) - set(suboptions))}"
                needed = {key for key, option in suboptions.items() if option.get("required")}
                assert needed <= set(value), f"{where}: {name} lacks {sorted(needed - set(value))}"


@pytest.mark.parametrize("library", LIBRARIES)
def test_the_roles_option_dicts_for_a_library_have_its_keys(library: str) -> None:
    """The dicts the roles keep for roles/daemon in their vars (__<role>_service...): the keys its spec knows."""
    suboptions = specs(library)["start"]["options"][f"{library}_service"]["options"]
    checked = 0
    for path in sorted((REPO / "roles").glob("*/vars/main.yml")):
        for name, value in (load(path) or {}).items():
            if re.fullmatch(r"__\w+_service", name) and isinstance(value, dict):
                checked += 1
                assert set(value) <= set(suboptions), f"{path.relative_to(REPO)}: {name}: {sorted(set(value) - set(suboptions))}"
                assert {"label", "instances"} <= set(value), f"{path.relative_to(REPO)}: {name}"
    assert checked >= 5
