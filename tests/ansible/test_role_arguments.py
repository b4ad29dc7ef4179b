"""The roles' arguments are checked once, on the control node: site.yml applies every role with
rolespec_validate: false (Ansible's own check is a task per host and role) and its control-node
preflight checks each play's roles for each of its hosts (plugins/action/cluster_role_arguments.py).

Run for real with ansible-playbook: the preflight's task as site.yml has it, over the inventories
cluster-cli renders from the repository's inventory files, and over small inventories with one bad
variable on one host. Nothing runs on a host; no root needed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from role_runner import REPO, PlaybookRun, ansible_playbook

from cluster_cli.build import write_build
from cluster_cli.loader import load_cluster

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

SITE = REPO / "playbooks" / "site.yml"
CHECK = "Check the roles' arguments for every host they are applied to"
INVENTORIES = [REPO / "inventories" / "local" / "inventory.yaml",
               *sorted((REPO / "inventories" / "examples").glob("*.yaml"))]


def site_plays() -> list[dict[str, Any]]:
    return yaml.safe_load(SITE.read_text(encoding="utf-8"))


def role_applications(play: dict[str, Any]) -> list[dict[str, Any]]:
    """Every whole-role application of a play: its roles: entries and its import_role/include_role
    tasks without tasks_from (one entry point is not the role), in pre_tasks, tasks and post_tasks."""
    found = [{"role": entry} if isinstance(entry, str) else entry for entry in play.get("roles", [])]
    for section in ("pre_tasks", "tasks", "post_tasks"):
        for task in play.get(section, []):
            for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
                if key in task and "tasks_from" not in task[key]:
                    found.append({"task": key, **task[key]})
    return found


def preflight_task() -> dict[str, Any]:
    [play] = [play for play in site_plays() if play["name"] == "Preflight on the control node"]
    [task] = [task for task in play["tasks"] if task["name"] == CHECK]
    return task


def run_check(tmp_path: Path, inventory: dict[str, Any] | Path, extra_vars: list[Path | dict] = (),
              options: tuple[str, ...] = ()) -> PlaybookRun:
    """The preflight's task, as site.yml has it, on the control node over ``inventory``."""
    play = [{"name": "Role arguments", "hosts": "localhost", "gather_facts": False, "tasks": [preflight_task()]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    if isinstance(inventory, dict):
        (tmp_path / "inventory.json").write_text(json.dumps(inventory))
        inventory = tmp_path / "inventory.json"
    argv = [ansible_playbook(), "-i", str(inventory), *options]
    for number, extra in enumerate(extra_vars):
        if isinstance(extra, dict):
            path = tmp_path / f"extra{number}.json"
            path.write_text(json.dumps(extra))
            extra = path
        argv += ["-e", f"@{extra}"]
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_STDOUT_CALLBACK": "minimal", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
    done = subprocess.run([*argv, str(tmp_path / "play.yml")], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300, check=False)
    return PlaybookRun(done.returncode, done.stdout, done.stderr)


def result_of(run: PlaybookRun) -> dict[str, Any]:
    """The task's result, as the minimal callback prints it (``localhost | FAILED! => {...}``)."""
    _head, found, body = run.stdout.partition("localhost | ")
    assert found, run.explain()
    return json.loads(body.partition(" => ")[2])


def rendered(tmp_path: Path) -> dict[str, str]:
    """What the small inventory's roles read from the control node: the rendered slurm.conf (slurmdbd's
    default cluster name is its ClusterName)."""
    (tmp_path / "slurm").mkdir(exist_ok=True)
    (tmp_path / "slurm" / "slurm.conf").write_text("ClusterName=small\n")
    return {"slurm_common_config_src": str(tmp_path / "slurm")}


def small_inventory(compute_vars: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A controller, a database host, a login host and compute hosts c1..c3 (with ``compute_vars``)."""
    compute = {host: dict((compute_vars or {}).get(host, {})) for host in ("c1", "c2", "c3")}
    return {"all": {"children": {"cluster": {"children": {
        "slurm_controller": {"hosts": {"ctl": {}}},
        "slurm_database": {"hosts": {"db": {}}},
        "slurm_compute": {"hosts": compute},
        "slurm_login": {"hosts": {"login": {}}},
        "training_env": {"hosts": {"c1": None, "c2": None, "c3": None, "login": None}},
        "slurm_nvml": {"hosts": {}},
    }}}}}


# -- site.yml: no per-host check, and the preflight covers every role it applies ------------------------


def test_every_role_site_yml_applies_is_imported_without_ansibles_per_host_check() -> None:
    applied = [(play["name"], application) for play in site_plays() for application in role_applications(play)]
    assert applied, "site.yml applies no role"
    for name, application in applied:
        assert "role" not in application, f"{name}: roles: {application['role']} (Ansible checks its arguments on every host)"
        if application["task"] == "ansible.builtin.import_role":
            assert application.get("rolespec_validate") is False, f"{name}: {application['name']} without rolespec_validate: false"


def test_the_preflight_checks_every_imported_role_for_its_plays_hosts() -> None:
    """Each import_role of a play (with rolespec_validate: false) is in the preflight's list under the
    play's own host pattern, in the same order, and the list names nothing else."""
    expected = []
    for play in site_plays():
        roles = [application["name"] for application in role_applications(play)
                 if application.get("task") == "ansible.builtin.import_role"]
        if roles:
            expected.append({"hosts": play["hosts"], "roles": roles})
    assert preflight_task()["cluster_cli.slurm.cluster_role_arguments"]["plays"] == expected


def test_the_preflight_check_runs_whatever_the_tags() -> None:
    [play] = [play for play in site_plays() if play["name"] == "Preflight on the control node"]
    assert "always" in play["tags"] and "tags" not in preflight_task() and "when" not in preflight_task()


# -- the repository's inventories pass ------------------------------------------------------------------


@pytest.mark.parametrize("inventory", INVENTORIES, ids=lambda path: path.stem)
def test_the_repository_inventories_pass(tmp_path: Path, inventory: Path) -> None:
    build = write_build(load_cluster(inventory), tmp_path / "build", tmp_path / "secrets")
    ansible = build.directory / "ansible"
    run = run_check(tmp_path, ansible / "inventory.yml", [ansible / "cluster_vars.yml", ansible / "secret_vars.yml"])
    assert run.returncode == 0, run.explain()
    result = result_of(run)
    hosts = yaml.safe_load((ansible / "inventory.yml").read_text())
    cluster = hosts["all"]["children"]["cluster"]["hosts"]
    assert result["checked"]["hosts"] == len(cluster), result
    # every host gets common, munge, slurm_common and at least one more role
    assert result["checked"]["host_roles"] >= 4 * len(cluster), result


# -- a bad variable on one host stops the deploy, naming host, role and option --------------------------


@pytest.mark.parametrize(("host_vars", "role", "message"), [
    ({"munge_wait_timeout": "soon"}, "munge",
     "argument 'munge_wait_timeout' is of type str and we were unable to convert to int"),
    ({"cluster_service_manager": "upstart"}, "common",
     "value of cluster_service_manager must be one of: auto, systemd, standalone, got: upstart"),
    ({"slurmd_nodes": [{"name": "c2", "port": "x"}]}, "slurmd",
     "argument 'port' is of type str found in 'slurmd_nodes'. and we were unable to convert to int"),
], ids=["type", "choices", "nested"])
def test_a_bad_variable_on_one_host_fails_naming_host_role_and_option(
        tmp_path: Path, host_vars: dict[str, Any], role: str, message: str) -> None:
    run = run_check(tmp_path, small_inventory({"c2": host_vars}), [rendered(tmp_path)])
    assert run.returncode != 0, run.explain()
    result = result_of(run)
    assert [(error["role"], error["hosts"]) for error in result["argument_errors"]] == [(role, ["c2"])], result
    assert result["argument_errors"][0]["message"].startswith(message), result
    assert f"role {role} on c2: {message}" in result["msg"]


def test_every_bad_host_and_option_is_named_and_the_same_message_once(tmp_path: Path) -> None:
    bad = {"slurmd_wait_timeout": "later"}
    run = run_check(tmp_path, small_inventory({"c1": bad, "c3": bad}),
                    [rendered(tmp_path), {"munge_wait_timeout": "soon", "training_env_test_user_uid": "x"}])
    assert run.returncode != 0, run.explain()
    errors = result_of(run)["argument_errors"]
    found = [(error["role"], error["message"].split(" is of type")[0], error["hosts"]) for error in errors]
    assert found == [
        ("munge", "argument 'munge_wait_timeout'", ["ctl", "db", "c1", "c2", "c3", "login"]),
        ("slurmd", "argument 'slurmd_wait_timeout'", ["c1", "c3"]),
        ("training_env", "argument 'training_env_test_user_uid'", ["c1", "c2", "c3", "login"]),
    ]


def test_a_host_outside_the_limit_is_not_checked(tmp_path: Path) -> None:
    inventory = small_inventory({"c2": {"munge_wait_timeout": "soon"}})
    passed = run_check(tmp_path, inventory, [rendered(tmp_path)], options=("--limit", "localhost,c1"))
    assert passed.returncode == 0, passed.explain()
    assert result_of(passed)["checked"] == {"hosts": 1, "host_roles": 5}
    failed = run_check(tmp_path, inventory, [rendered(tmp_path)], options=("--limit", "localhost,c2"))
    assert failed.returncode != 0 and [error["hosts"] for error in result_of(failed)["argument_errors"]] == [["c2"]]


def run_own_role(tmp_path: Path, compute_vars: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The preflight's task over a role of the test's own, found in the playbook's roles/: a required
    option (the repository's roles have none: each has a default, test_role_interface.py) and an int
    whose default is a template reading other variables."""
    role = tmp_path / "roles" / "needs_a_value"
    for directory in ("meta", "defaults"):
        (role / directory).mkdir(parents=True)
    (role / "meta" / "argument_specs.yml").write_text(yaml.safe_dump({"argument_specs": {"main": {"options": {
        "needs_a_value_name": {"type": "str", "required": True, "description": "A value no default gives."},
        "needs_a_value_port": {"type": "int", "default": "{{ needs_a_value_base | default(1) }}",
                               "description": "A template."},
    }}}}))
    (role / "defaults" / "main.yml").write_text('needs_a_value_port: "{{ needs_a_value_base | default(1) }}"\n')
    task = preflight_task()
    task["cluster_cli.slurm.cluster_role_arguments"]["plays"] = [{"hosts": "slurm_compute", "roles": ["needs_a_value"]}]
    play = [{"name": "Role arguments", "hosts": "localhost", "gather_facts": False, "tasks": [task]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    (tmp_path / "inventory.json").write_text(json.dumps(small_inventory(compute_vars)))
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
           "ANSIBLE_STDOUT_CALLBACK": "minimal", "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp")}
    done = subprocess.run([ansible_playbook(), "-i", str(tmp_path / "inventory.json"), str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    run = PlaybookRun(done.returncode, done.stdout, done.stderr)
    assert (done.returncode == 0) == ("argument_errors" not in result_of(run)), run.explain()
    return result_of(run)


def test_a_missing_required_option_is_named(tmp_path: Path) -> None:
    result = run_own_role(tmp_path, {"c1": {"needs_a_value_name": "x"}, "c3": {"needs_a_value_name": "y"}})
    assert result["argument_errors"] == [{"role": "needs_a_value", "hosts": ["c2"],
                                          "message": "missing required arguments: needs_a_value_name"}], result
    assert "role needs_a_value on c2: missing required arguments: needs_a_value_name" in result["msg"]


def test_a_default_template_is_rendered_in_each_hosts_variables(tmp_path: Path) -> None:
    """Rendered as Ansible's own check renders it, for each host: c2's default reads its variable, and
    that one's template reads another (the same template, other values: not one result for all)."""
    named = {"needs_a_value_name": "x"}
    result = run_own_role(tmp_path, {
        "c1": named,
        "c2": {**named, "needs_a_value_base": "{{ needs_a_value_word }}", "needs_a_value_word": "seven"},
        "c3": {**named, "needs_a_value_base": "{{ needs_a_value_word }}", "needs_a_value_word": "7"},
    })
    assert [(error["hosts"], error["message"]) for error in result["argument_errors"]] == [
        (["c2"], "argument 'needs_a_value_port' is of type str and we were unable to convert to int: "
                 "\"'seven'\" cannot be converted to an int")], result
    assert result["checked"] == {"hosts": 3, "host_roles": 3}
