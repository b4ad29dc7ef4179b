"""roles/daemon's stop without systemd, with the real start-stop-daemon: a daemon whose binary is
gone (its package removed, or never installed where a purge reaches) is nothing to stop, not a
failure (a CI machine with an earlier cluster's state but no Prometheus package failed its
`teardown --purge` on it); a daemon that runs is stopped."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, run_play

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(shutil.which("start-stop-daemon") is None, reason="needs Debian's start-stop-daemon"),
]


def _stop(tmp_path: Path, binary: str, pidfile: Path):
    service = {"label": "a test daemon", "manager": "standalone", "exec": binary,
               "instances": [{"name": "testd", "unit": "testd", "pidfile": str(pidfile)}]}
    play = {"tasks": [{"ansible.builtin.include_role": {"name": "daemon", "tasks_from": "stop",
                                                         "rolespec_validate": False},
                       "vars": {"daemon_service": service}}]}
    return run_play(tmp_path / "work", play, {HOST: {}}, {})


def test_a_daemon_whose_binary_is_gone_is_nothing_to_stop(tmp_path: Path) -> None:
    pidfile = tmp_path / "testd.pid"
    pidfile.write_text("1\n")  # a pid file left behind, naming a process of another binary
    run = _stop(tmp_path, str(tmp_path / "removed" / "prometheus"), pidfile)
    assert run.returncode == 0, run.explain()
    assert run.recap()["changed"] == 0


def test_a_running_daemon_is_stopped(tmp_path: Path) -> None:
    binary = tmp_path / "sleeper"
    shutil.copy("/bin/sleep", binary)
    process = subprocess.Popen([str(binary), "300"])
    pidfile = tmp_path / "testd.pid"
    pidfile.write_text(f"{process.pid}\n")
    try:
        run = _stop(tmp_path, str(binary), pidfile)
        assert run.returncode == 0, run.explain()
        assert run.recap()["changed"] == 1
        assert process.wait(timeout=10) != 0
    finally:
        process.kill()
