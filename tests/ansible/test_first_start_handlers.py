"""The restart handlers of roles/node_exporter, roles/munge, roles/sssd and roles/prometheus: a
change restarts a daemon that ran before it, and not one whose package this run installed afresh
(policy_rc_d kept it stopped: the role's run step starts it for the first time, with the new
files); an upgraded package's daemon is restarted. Run for real with ansible-playbook on
localhost: each role's own handler and roles/daemon's restart, the host without systemd,
start-stop-daemon's stand-ins logging each call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, run_play

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

# role -> (its install's registered result, the daemon's package, its "restart" handler, its service)
ROLES = {
    "node_exporter": ("__node_exporter_install", "prometheus-node-exporter", "Node exporter restart",
                      "__node_exporter_service"),
    "munge": ("__munge_install", "munge", "Munge restart", "__munge_service"),
    "sssd": ("__sssd_install", "sssd-ldap", "SSSD restart", "__sssd_service"),
    "prometheus": ("__prometheus_install", "prometheus", "Prometheus restart", "__prometheus_service"),
}


def _changed(tmp_path: Path, role: str, install: dict | None) -> list[str]:
    """The stand-ins' calls after a change notifies ``role``'s handler; ``install``: the result the
    role's install step registered (None: the install did not run, e.g. a run with --tags)."""
    registered, _package, handler, service = ROLES[role]
    log = tmp_path / "calls.log"
    logged = ["sh", "-c", f'echo "$0" >> {log}']
    extra = {
        "common_service_manager": "standalone",
        "__daemon_stop_base": [*logged, "stop"],
        "__daemon_start_base": [*logged, "start"],
        # munge's preflight (imported below for its handlers) checks that the key file exists
        "munge_key_src": str(Path(__file__)),
        # and sssd's that sssd.conf does, Prometheus' that its two files do
        "sssd_conf_src": str(Path(__file__)),
        "prometheus_config_src": str(tmp_path / "monitoring"),
        service: {"label": role, "exec": "/usr/bin/true", "ports": [],
                  "instances": [{"name": role, "unit": role, "pidfile": str(tmp_path / f"{role}.pid")}]},
    }
    (tmp_path / "monitoring").mkdir(parents=True, exist_ok=True)
    for name in ("prometheus.yml", "cluster-alerts.yml"):
        (tmp_path / "monitoring" / name).write_text("")
    tasks = [{"name": "The install's result", "ansible.builtin.set_fact": {registered: install}}] if install else []
    tasks += [
        {"name": "A change", "ansible.builtin.command": {"argv": ["true"]}, "changed_when": True, "notify": handler},
        {"name": "The role's handlers", "ansible.builtin.import_role": {"name": role, "tasks_from": "preflight",
                                                                        "rolespec_validate": False}},
    ]
    run = run_play(tmp_path / "work", {"tasks": tasks}, {HOST: {}}, extra)
    assert run.returncode == 0, run.explain()
    return log.read_text().split() if log.exists() else []


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_change_restarts_a_daemon_that_ran_before_it(tmp_path: Path, role: str) -> None:
    assert _changed(tmp_path / "installed", role, {"missing": [], "absent": []}) == ["stop", "start"]
    assert _changed(tmp_path / "upgraded", role, {"missing": [f"{ROLES[role][1]}=2"], "absent": []}) == ["stop", "start"]
    assert _changed(tmp_path / "unknown", role, None) == ["stop", "start"]


@pytest.mark.parametrize("role", sorted(ROLES))
def test_a_package_installed_afresh_by_this_run_is_not_restarted_before_its_first_start(tmp_path: Path, role: str) -> None:
    package = ROLES[role][1]
    assert _changed(tmp_path, role, {"missing": [package], "absent": [package]}) == []
