"""cluster-cli status asks each host about its daemons: what it reports from their answers."""

from __future__ import annotations

import importlib
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_cli import status as status_module

from cluster_cli.loader import load_cluster, load_cluster_text
from cluster_cli.probe import HostProbe, agent, daemon_request
from cluster_cli.progress import daemon_lines
from cluster_cli.status import ClusterStatus, daemon_statuses
from unit_helpers import started

HETERO = Path(__file__).resolve().parents[2] / "inventories" / "examples" / "hetero-local.yaml"
NODES = ("h100-1", "h100-2", "l4-1", "cpu1", "cpu2")
PORTS = {"slurmctld": 6817, "slurmdbd": 6819, "mariadbd": 3306, "slurmd@h100-1": 17011, "slurmd@h100-2": 17012,
         "slurmd@l4-1": 17021, "slurmd@cpu1": 17031, "slurmd@cpu2": 17032}


def test_the_agent_tells_an_open_port_from_a_closed_one() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert agent.port_open("127.0.0.1", port)
    assert not agent.port_open("127.0.0.1", port)


def test_each_host_is_asked_about_every_daemon_it_should_run_and_its_port() -> None:
    cluster = load_cluster(HETERO)
    request = daemon_request(cluster, cluster.hosts["localhost"])
    assert request["ports"] == {daemon: ["127.0.0.1", port] for daemon, port in PORTS.items()}
    assert request["pidfiles"]["slurmd@cpu2"] == "/run/slurm/slurmd-cpu2.pid"
    assert request["pidfiles"]["mariadbd"] == ""  # found by its name
    assert set(request) == {"pidfiles", "programs", "ports"}  # no file checksums, no packages: status stays fast


def test_the_monitoring_daemons_are_asked_about_at_the_address_they_listen_on_and_found_by_what_runs_them() -> None:
    text = HETERO.read_text() + "monitoring:\n  host: localhost\n  alertmanager: true\n"
    cluster = load_cluster_text(text, "hetero-monitored.yaml")
    request = daemon_request(cluster, cluster.hosts["localhost"])
    address = cluster.hosts["localhost"].address
    assert {daemon: where for daemon, where in request["ports"].items() if daemon not in PORTS} == {
        "prometheus-node-exporter": [address, 9100], "cluster-slurm-exporter": [address, 9446],
        "prometheus": [address, 9090], "prometheus-alertmanager": [address, 9093]}
    assert request["programs"] == {"cluster-slurm-exporter": "cluster_cli.exporters.slurm_metrics"}
    assert request["pidfiles"]["prometheus"] == ""
    for module in request["programs"].values():
        importlib.import_module(module)  # the module the exporter's role runs (python -m)


def test_the_agent_finds_a_python_daemon_by_its_module_and_no_other_process() -> None:
    server = started([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "0"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert agent.find_daemon("web", "http.server") == server.pid
        assert agent.process_facts("", 0.0, "web", "http.server")["running"]
        assert agent.find_daemon("web", "http.client") is None
        assert agent.find_daemon("web") is None  # no program, nor module, of its name
    finally:
        server.kill()
        server.wait()


def _answer(dead: tuple[str, ...] = (), closed: tuple[str, ...] = ()) -> HostProbe:
    daemons = {name: {"pid": 1, "running": name not in dead} for name in PORTS}
    ports = {name: name not in dead and name not in closed for name in PORTS}
    return HostProbe("localhost", daemons=daemons, ports=ports)


def test_a_killed_slurmd_makes_the_cluster_unhealthy_and_is_named() -> None:
    cluster = load_cluster(HETERO)
    status = ClusterStatus("hetero", "localhost", True, "UP")
    status.daemons = daemon_statuses(cluster, {"localhost": _answer(dead=("slurmd@l4-1",))})
    assert not status.healthy
    assert [(daemon.daemon, daemon.problem) for daemon in status.failed_daemons] == [("slurmd@l4-1", "not running")]
    assert daemon_lines(status) == ["[red]slurmd@l4-1[/red] on localhost: not running"]


def test_a_running_daemon_that_does_not_listen_is_a_problem_with_its_port() -> None:
    cluster = load_cluster(HETERO)
    daemons = daemon_statuses(cluster, {"localhost": _answer(closed=("slurmdbd",))})
    assert [daemon.problem for daemon in daemons if daemon.problem] == [
        "running, but nothing accepts connections on port 6819"
    ]


def test_every_daemon_up_is_healthy_and_a_host_that_cannot_be_asked_is_not() -> None:
    cluster = load_cluster(HETERO)
    status = ClusterStatus("hetero", "localhost", True, "UP", daemons=daemon_statuses(cluster, {"localhost": _answer()}))
    assert status.healthy and daemon_lines(status) == ["daemons: all 8 running and listening"]
    status.daemons = daemon_statuses(cluster, {"localhost": HostProbe("localhost", error="ssh: timed out")})
    assert not status.healthy and status.failed_daemons[0].problem == "not reachable: ssh: timed out"


def test_status_asks_slurmctld_for_nodes_allocated_with_no_job_and_is_unhealthy_with_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller's answers as status gets them (the HostCommand stand-in answers each
    command); every daemon up, every node in a usable state, and still unhealthy."""
    answers = {
        "scontrol ping": "Slurmctld(primary) at localhost is UP",
        "sinfo": "\n".join(f"{name}|{'mixed' if name == 'cpu2' else 'idle'}|none|(null)" for name in NODES),
        "scontrol --oneliner": "NodeName=cpu2 CPUAlloc=1 AllocMem=1536 State=MIXED AllocTRES=cpu=1,mem=1.50G",
        "squeue": "9|COMPLETED|2020-01-01T00:00:00|cpu2",
        "sacctmgr": "hetero",
    }

    class Controller:
        def __init__(self, cluster: object, workdir: Path):
            pass

        def run(self, host: str, argv: list[str], timeout_s: float = 30) -> tuple[int, str]:
            key = next(key for key in answers if " ".join(argv).startswith(key))
            return 0, answers[key]

    monkeypatch.setattr(status_module, "HostCommand", Controller)
    monkeypatch.setattr(status_module, "probe_daemons", lambda cluster: {"localhost": _answer()})
    found = status_module.collect_status(load_cluster(HETERO))
    assert [node.state for node in found.nodes].count("mixed") == 1 and not found.failed_daemons
    assert not found.healthy
    assert len(found.stranded) == 1
    assert found.stranded[0].startswith("cpu2: mixed with 1 CPUs, 1536 MB and 0 GPUs allocated")
    answers["squeue"] = "9|RUNNING|2030-01-01T00:00:00|cpu2"
    assert status_module.collect_status(load_cluster(HETERO)).healthy
