"""`cluster-cli upgrade`: the preflight's refusals, the target version, the confirmation, and the
order of playbooks/upgrade.yml (read from the YAML). The real upgrade (24.11 -> 26.05 with jobs
running) is molecule/tests/test_60_upgrade.py on the test bed."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from unit_helpers import SHIPPED_INVENTORIES

from cluster_cli.ansible.runner import TaskFailure
from cluster_cli.cli import main
from cluster_cli.errors import ExitCode
from cluster_cli.loader import load_cluster
from cluster_cli.probe import HostProbe
from cluster_cli.confirm import confirm_problem
from cluster_cli.upgrade import (
    UpgradeRefused,
    backup_files,
    failure_daemon,
    hosts_to_upgrade,
    preflight_problems,
    target_version,
)

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = REPO / "playbooks" / "upgrade.yml"
TASKS = REPO / "playbooks" / "upgrade_tasks"
BOOKWORM, TRIXIE, FORKY = "22.05.8-4+deb12u3", "24.11.5-4+deb13u1", "26.05.5-1"


def _probe(host: str, version: str | None = None, error: str | None = None, **packages: str) -> HostProbe:
    found: dict[str, str | None] = {"slurm-client": version, "munge": "0.5.16"}
    found |= {name.replace("_", "-"): value for name, value in packages.items()}
    return HostProbe(host, packages=found, error=error)


def _cluster(tmp_path: Path, pin: str | None = None):
    text = SHIPPED_INVENTORIES["minimal"].read_text()
    if pin:
        text += f"\nslurm:\n  version: \"{pin}\"\n" if "\nslurm:" not in text else ""
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return load_cluster(path)


def test_a_skip_of_too_many_releases_names_the_intermediate_releases() -> None:
    problems = preflight_problems({"c1": _probe("c1", BOOKWORM, slurmd=BOOKWORM)}, FORKY)
    assert len(problems) == 1
    assert problems[0].startswith("c1 (slurm-client 22.05.8-4+deb12u3), c1 (slurmd 22.05.8-4+deb12u3): ")
    assert "26.05 upgrades directly only from 25.11, 25.05, 24.11, not from 22.05" in problems[0]
    assert "upgrade through 23.11 then 25.05 first" in problems[0]


def test_a_supported_upgrade_has_no_problem_and_lists_the_hosts_to_upgrade() -> None:
    probes = {"ctl": _probe("ctl", TRIXIE, slurmctld=TRIXIE, slurmdbd=TRIXIE), "c1": _probe("c1", FORKY, slurmd=FORKY)}
    assert preflight_problems(probes, FORKY) == []
    assert hosts_to_upgrade(probes, FORKY) == {"ctl": {"slurm-client": TRIXIE, "slurmctld": TRIXIE, "slurmdbd": TRIXIE}}


@pytest.mark.parametrize(("installed", "target"), [(FORKY, TRIXIE), ("26.05.6-1", FORKY)])
def test_a_downgrade_is_refused(installed: str, target: str) -> None:
    problems = preflight_problems({"ctl": _probe("ctl", installed)}, target)
    assert len(problems) == 1 and problems[0].startswith(f"ctl (slurm-client {installed}): ")
    assert "downgrade" in problems[0]


def test_a_host_that_cannot_be_probed_or_has_no_slurm_is_named() -> None:
    probes = {"c1": _probe("c1", error="ssh root@10.0.0.21: Connection refused"), "c2": _probe("c2"),
              "c3": _probe("c3", TRIXIE)}
    assert preflight_problems(probes, FORKY) == [
        "c1: could not be probed: ssh root@10.0.0.21: Connection refused",
        "c2: no Slurm package installed: deploy first",
    ]


def test_the_target_is_the_inventory_pin_and_a_different_to_is_refused(tmp_path: Path) -> None:
    pinned = _cluster(tmp_path, FORKY)
    assert target_version(pinned, None) == FORKY
    assert target_version(pinned, FORKY) == FORKY
    with pytest.raises(UpgradeRefused, match="set slurm.version to 26.05.6-1 first"):
        target_version(pinned, "26.05.6-1")
    unpinned = _cluster(tmp_path)
    with pytest.raises(UpgradeRefused, match="no target version"):
        target_version(unpinned, None)
    with pytest.raises(UpgradeRefused, match="27.05"):
        target_version(unpinned, "27.05.1-1")
    assert UpgradeRefused("x").exit_code == ExitCode.INVALID


def test_the_confirmation_is_the_cluster_name(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    assert confirm_problem(cluster, cluster.name, "upgrade it") is None
    assert "not this cluster's name" in (confirm_problem(cluster, "other", "upgrade it") or "")
    assert f"--yes {cluster.name}" in (confirm_problem(cluster, None, "upgrade it") or "")


def test_the_backup_files_are_named_after_the_database_and_cluster(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    dump, state = backup_files(cluster, "/var/backups/cluster-cli/", "20261124-030000")
    assert dump == f"/var/backups/cluster-cli/slurm_acct_db-{cluster.name}-20261124-030000.sql"
    assert state == f"/var/backups/cluster-cli/statesave-{cluster.name}-20261124-030000.tar.gz"


def test_a_failed_task_is_shown_with_the_log_of_the_daemon_it_names() -> None:
    def failed(task: str) -> TaskFailure:
        return TaskFailure("ctl", task, None, "boom")
    assert failure_daemon(failed("Wait for slurmdbd to listen once the conversion is done")) == "slurmdbd"
    assert failure_daemon(failed("Restart slurmctld on the new binary")) == "slurmctld"
    assert failure_daemon(failed("Wait until slurmctld sees each slurmd of the host at the new version")) == "slurmctld"
    assert failure_daemon(failed("Upgrade the Slurm client packages on the login host")) is None


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the ssh client")
def test_upgrade_names_each_unreachable_host_and_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # real SSH to a port nothing listens on: every host refuses; nothing is touched
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    text = SHIPPED_INVENTORIES["minimal"].read_text().replace("ssh:\n  user: root\n", "ssh:\n  user: root\n  port: 1\n")
    text = text.replace("address: 10.0.0.10", "address: 127.0.0.1").replace("10.0.0.[21-24]", "127.0.0.[21-24]")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(text)
    result = CliRunner().invoke(main, ["upgrade", str(inventory), "--to", FORKY, "--yes", "x"])
    assert result.exit_code == ExitCode.INVALID, result.output
    assert "upgrade refused, nothing was touched" in result.output
    for host in ("head", "gpu01", "gpu02", "gpu03", "gpu04"):
        assert f"{host}: could not be probed: ssh root@" in result.output


# ---- playbooks/upgrade.yml, read as data --------------------------------------------------


def _plays() -> list[dict[str, Any]]:
    return yaml.safe_load(PLAYBOOK.read_text())


def _task_names(tasks: list[dict[str, Any]]) -> list[str]:
    names = []
    for task in tasks:
        names.append(task["name"])
        for section in ("block", "rescue", "always"):
            names += _task_names(task.get(section, []))
    return names


def test_the_plays_follow_schedmds_order() -> None:
    upgrading = [(play["hosts"], play.get("serial")) for play in _plays() if "preflight" not in play.get("tags", [])]
    assert upgrading == [
        ("slurm_database", None),           # slurmdbd first (converts the database)
        ("slurm_controller[1:1]", None),    # the backup slurmctld, when there is one
        ("slurm_controller[0]", None),      # then the primary
        ("slurm_login", None),
        ("slurm_compute", "{{ upgrade_batch | default(1) }}"),  # slurmd in batches
    ]
    preflight = [play for play in _plays() if "preflight" in play.get("tags", [])]
    assert preflight and _plays()[:len(preflight)] == preflight, "every preflight play comes first"


def test_slurmdbd_is_stopped_and_dumped_to_a_0600_file_before_its_package_changes() -> None:
    play = next(play for play in _plays() if play["hosts"] == "slurm_database" and "preflight" not in play.get("tags", []))
    names = _task_names(play["tasks"])
    order = ["Stop slurmdbd before the dump",
             "Dump the accounting database into the backup file",
             "Upgrade the Slurm packages on the slurmdbd host",
             "Give slurmdbd's first start the database conversion timeout",
             "Start slurmdbd, which converts the database to the new release",
             "Wait for slurmdbd to listen (a small database converts in seconds)",
             "Check that slurmdbd still runs, converting, or stop here (it exited; see its log)",
             "Wait for slurmdbd to listen once the conversion is done"]
    assert [name for name in names if name in order] == order
    block = next(task for task in play["tasks"] if "block" in task)["block"]
    include = next(task for task in block if task["name"] == order[1])
    assert include["ansible.builtin.include_role"] == {"name": "slurmdbd", "tasks_from": "backup.yml"}
    assert include["vars"] == {"__slurmdbd_dump_file": "{{ upgrade_backup_file }}"}
    wait = next(task for task in block if task["name"] == order[-1])["ansible.builtin.wait_for"]
    assert wait["timeout"] == "{{ upgrade_conversion_timeout_s }}"


def test_the_database_dump_is_a_0600_root_file_before_anything_is_written_to_it() -> None:
    """roles/slurmdbd/tasks/backup.yml: shared by the upgrade and teardown --purge."""
    tasks = yaml.safe_load((REPO / "roles" / "slurmdbd" / "tasks" / "backup.yml").read_text())
    names = [task["name"] for task in tasks]
    order = ["Create the slurmdbd database dump file, 0600 before anything is written to it",
             "Dump the slurmdbd accounting database (root over the unix socket, no password)",
             "Check the slurmdbd database dump (not empty, still 0600 root)"]
    assert [name for name in names if name in order] == order
    touch = tasks[names.index(order[0])]["ansible.builtin.file"]
    assert (touch["state"], touch["mode"], touch["owner"]) == ("touch", "0600", "root")
    dump = tasks[names.index(order[1])]["ansible.builtin.command"]["argv"]
    assert dump[0] == "mysqldump" and not any("pass" in str(arg).lower() for arg in dump)
    directory = tasks[0]["ansible.builtin.file"]
    assert (directory["state"], directory["mode"]) == ("directory", "0700")


def _all_tasks(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [task for item in node for task in _all_tasks(item)]
    if isinstance(node, dict):
        found = [node] if "name" in node and "hosts" not in node else []
        for key in ("tasks", "block", "rescue", "always", "handlers"):
            found += _all_tasks(node.get(key, []))
        return found
    return []


def test_the_upgrade_runs_commands_as_argv_lists_only() -> None:
    tasks = _all_tasks(_plays())
    for path in sorted(TASKS.glob("*.yml")):
        tasks += _all_tasks(yaml.safe_load(path.read_text()))
    modules = {key for task in tasks for key in task if key.startswith("ansible.")}
    assert "ansible.builtin.shell" not in modules and "ansible.builtin.raw" not in modules
    commands = [task["ansible.builtin.command"] for task in tasks if "ansible.builtin.command" in task]
    assert commands and all(isinstance(command, dict) and "argv" in command for command in commands)
    source = ast.parse((REPO / "cluster_cli" / "upgrade.py").read_text())
    assert not [node for node in ast.walk(source) if isinstance(node, ast.keyword) and node.arg == "shell"]
