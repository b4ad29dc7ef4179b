"""roles/node_exporter's handler: new arguments restart a node_exporter that ran before them, and
not one whose package this run installed (policy_rc_d kept it stopped: run.yml's start is its
first, with the new arguments). Run for real with ansible-playbook on localhost: the role's own
handler and roles/daemon's restart, the host without systemd, start-stop-daemon's stand-ins
logging each call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, run_play

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")


def _arguments_changed(tmp_path: Path, missing_before: list[str]) -> list[str]:
    log = tmp_path / "calls.log"
    logged = ["sh", "-c", f'echo "$0" >> {log}']
    extra = {
        "common_service_manager": "standalone",
        "__daemon_stop_base": [*logged, "stop"],
        "__daemon_start_base": [*logged, "start"],
        "__node_exporter_service": {
            "label": "node_exporter", "exec": "/usr/bin/prometheus-node-exporter", "ports": [],
            "instances": [{"name": "prometheus-node-exporter", "unit": "prometheus-node-exporter",
                           "pidfile": str(tmp_path / "node-exporter.pid"), "args": []}],
        },
    }
    play = {"tasks": [
        {"name": "The install's result", "ansible.builtin.set_fact": {"__node_exporter_install": {"missing": missing_before}}},
        {"name": "New arguments", "ansible.builtin.command": {"argv": ["true"]}, "changed_when": True,
         "notify": "Node exporter restart"},
        {"name": "The role's handlers", "ansible.builtin.import_role": {"name": "node_exporter", "tasks_from": "preflight",
                                                                        "rolespec_validate": False}},
    ]}
    run = run_play(tmp_path / "work", play, {HOST: {}}, extra)
    assert run.returncode == 0, run.explain()
    return log.read_text().split() if log.exists() else []


def test_new_arguments_restart_a_node_exporter_that_ran_before(tmp_path: Path) -> None:
    assert _arguments_changed(tmp_path, []) == ["stop", "start"]


def test_a_package_installed_by_this_run_is_not_restarted_before_its_first_start(tmp_path: Path) -> None:
    assert _arguments_changed(tmp_path, ["prometheus-node-exporter"]) == []
