"""Teardown of the local cluster leaves no daemon running (runs last: files run in name order)."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from deployed import SECRET_MARKERS, DeployedCluster

pytestmark = pytest.mark.deploy

PORTS = {6817: "slurmctld", 6819: "slurmdbd", 3306: "MariaDB", 17001: "slurmd node1", 17002: "slurmd node2", 17003: "slurmd node3",
         9090: "Prometheus", 9100: "node_exporter", 9446: "the Slurm exporter"}
PID_FILES = ["/run/slurm/slurmctld.pid", "/run/slurm/slurmdbd.pid"] + [f"/run/slurm/slurmd-node{i}.pid" for i in (1, 2, 3)] + [
    "/run/prometheus/prometheus.pid", "/run/prometheus/prometheus-node-exporter.pid", "/run/slurm/cluster-slurm-exporter.pid"]


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


def test_purge_asks_first_and_dumps_the_database_before_dropping_it(
    deployed_cluster: DeployedCluster, tmp_path: Path
) -> None:
    inventory = str(deployed_cluster.inventory)
    state_dir = Path("/var/lib/slurm/slurmctld")
    refused = deployed_cluster.cli("teardown", inventory, "--purge", timeout=300)  # no terminal, no --yes
    assert refused.returncode == 2 and "--yes local" in refused.stderr, refused.stdout[-2000:] + refused.stderr
    assert "PLAY" not in refused.stdout and state_dir.is_dir(), "something was deleted before the refusal"
    backups = tmp_path / "backups"
    done = deployed_cluster.cli("teardown", inventory, "--purge", "--yes", "local", "--backup-dir", str(backups),
                                timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    [dump] = list(backups.glob("slurm_acct_db-local-*.sql"))
    assert stat.S_IMODE(dump.stat().st_mode) == 0o600 and dump.stat().st_uid == 0
    assert "CREATE DATABASE" in dump.read_text() and str(dump) in done.stdout
    assert not listening(3306), "MariaDB, which the role started for the purge, still runs"
    # the purged cluster's secrets are no longer the hosts' to defend: the next deploy, from any
    # control node (the next test session's own state), is not refused by the secrets preflight
    leftovers = [marker for marker in SECRET_MARKERS if marker.exists()]
    assert not leftovers, f"the purge left the markers of the cluster's secrets: {leftovers}"
