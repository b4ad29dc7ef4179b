"""plugins/modules/daemon_listening.py, run for real by ansible-playbook: it waits for ports to listen, and
fails at once, naming why, when the daemon it waits for is gone (not after the whole timeout)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest
from role_runner import HOST, PlaybookRun, ansible_playbook, run_play

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait(tmp_path: Path, ports: list[int], timeout: int = 20, env: dict[str, str] | None = None,
          **checks: list[str]) -> tuple[PlaybookRun, float]:
    task = {"name": "wait", "cluster_cli.slurm.daemon_listening": {"ports": ports, "timeout": timeout, **checks}}
    started = time.monotonic()
    run = run_play(tmp_path / "work", {"tasks": [task]}, {HOST: {}}, {}, env=env)
    return run, time.monotonic() - started


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_listening_port_is_found_without_connecting(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        pidfile = tmp_path / "alive.pid"
        pidfile.write_text(f"{os.getpid()}\n")
        run, _ = _wait(tmp_path, [server.getsockname()[1]], pidfiles=[str(pidfile)])
    assert run.returncode == 0, run.explain()


def test_a_daemon_that_exited_fails_the_wait_at_once(tmp_path: Path) -> None:
    pidfile = tmp_path / "dead.pid"
    pidfile.write_text(f"{_dead_pid()}\n")
    run, seconds = _wait(tmp_path, [_closed_port()], timeout=60, pidfiles=[str(pidfile)])
    assert run.returncode != 0 and "has exited" in run.text, run.explain()
    assert seconds < 30, f"took {seconds:.0f} s: the wait polled on after the daemon was gone"


def test_a_failed_unit_fails_the_wait_at_once(tmp_path: Path) -> None:
    """systemd stands behind a stub `systemctl` on PATH: this machine has no systemd as PID 1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "systemctl"
    stub.write_text("#!/bin/sh\necho failed\nexit 3\n")
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    run, seconds = _wait(tmp_path, [_closed_port()], timeout=60, env=env, units=["slurmctld"])
    assert run.returncode != 0 and "slurmctld is failed" in run.text, run.explain()
    assert seconds < 30


def test_a_running_daemon_that_never_listens_fails_after_the_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "alive.pid"
    pidfile.write_text(f"{os.getpid()}\n")
    run, _seconds = _wait(tmp_path, [_closed_port()], timeout=2, pidfiles=[str(pidfile)])
    assert run.returncode != 0 and "still not listening after 2 s" in run.text, run.explain()
