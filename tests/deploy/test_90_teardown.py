"""Teardown of the local cluster leaves no daemon running (runs last: files run in name order)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from deployed import DeployedCluster

pytestmark = pytest.mark.deploy

PORTS = {6817: "slurmctld", 6819: "slurmdbd", 3306: "MariaDB", 17001: "slurmd node1", 17002: "slurmd node2", 17003: "slurmd node3"}
PID_FILES = ["/run/slurm/slurmctld.pid", "/run/slurm/slurmdbd.pid"] + [f"/run/slurm/slurmd-node{i}.pid" for i in (1, 2, 3)]


def listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def alive(pid_file: str) -> bool:
    path = Path(pid_file)
    if not path.exists():
        return False
    try:
        os.kill(int(path.read_text().strip()), 0)
    except (ValueError, ProcessLookupError):
        return False
    return True


def test_teardown_stops_every_daemon(deployed_cluster: DeployedCluster) -> None:
    assert listening(6817), "slurmctld should be running before teardown"
    completed = deployed_cluster.cli("teardown", str(deployed_cluster.inventory), timeout=300)
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    still_listening = [name for port, name in PORTS.items() if listening(port)]
    assert not still_listening, f"still listening after teardown: {still_listening}"
    still_alive = [pid_file for pid_file in PID_FILES if alive(pid_file)]
    assert not still_alive, f"processes of these pid files still run: {still_alive}"
    munge_socket = Path("/run/munge/munge.socket.2")
    assert not munge_socket.exists() or not listening_unix(munge_socket), "munged still answers"


def listening_unix(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        return probe.connect_ex(str(path)) == 0
