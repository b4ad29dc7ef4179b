"""Node lifecycle rules: whose drain may be lifted, and what is sent to Slurm.

slurmctld's answers are given here as sinfo prints them (tests/deploy/test_60_day2.py runs the
same verbs against the real daemons); what is tested is cluster-cli's reading of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_cli import node_lifecycle as nodes
from cluster_cli.errors import RefusedError
from cluster_cli.loader import load_cluster

LOCAL = Path(__file__).resolve().parents[2] / "inventories" / "local" / "inventory.yaml"
SINFO = (
    "node1|idle|Unknown|Unknown|none\n"
    "node2|drained|root|2026-11-24T02:02:57|bad fan\n"
    "node3|draining|root|2026-11-24T02:03:00|cluster-cli: maintenance\n"
)


@pytest.fixture
def controller(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Records the commands sent to the controller; sinfo answers SINFO."""
    sent: list[list[str]] = []

    def answer(cluster, argv, timeout_s=30):
        sent.append(argv)
        return SINFO if argv[0] == "sinfo" else ""

    monkeypatch.setattr(nodes, "controller_command", answer)
    return sent


def test_an_operators_drain_is_not_lifted_without_force(controller: list[list[str]]) -> None:
    cluster = load_cluster(LOCAL)
    with pytest.raises(nodes.ForeignDrainError, match=r"node2 \('bad fan', set by root"):
        nodes.resume(cluster, ["node2", "node3"])
    assert not [argv for argv in controller if argv[0] == "scontrol"], "something was resumed"


def test_force_lifts_it_and_only_drained_nodes_are_resumed(controller: list[list[str]]) -> None:
    cluster = load_cluster(LOCAL)
    assert nodes.resume(cluster, ["node1", "node2", "node3"], force=True) == ["node2", "node3"]
    assert controller[-1] == ["scontrol", "update", "NodeName=node[2-3]", "State=RESUME"]


def test_our_own_drain_resumes_without_force(controller: list[list[str]]) -> None:
    assert nodes.resume(load_cluster(LOCAL), ["node3"]) == ["node3"]


def test_the_health_checks_drain_resumes_without_force(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[list[str]] = []

    def answer(cluster, argv, timeout_s=30):
        sent.append(argv)
        return "node1|drained|root|2026-11-24T02:02:57|cluster-cli health: gpu /dev/nvidia0 missing\n"

    monkeypatch.setattr(nodes, "controller_command", answer)
    assert nodes.resume(load_cluster(LOCAL), ["node1"]) == ["node1"]
    assert sent[-1] == ["scontrol", "update", "NodeName=node1", "State=RESUME"]


def test_a_drain_carries_the_cluster_cli_prefix(controller: list[list[str]]) -> None:
    nodes.drain(load_cluster(LOCAL), ["node1"], "  swap PSU ")
    assert controller[-1] == ["scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=cluster-cli: swap PSU"]


def test_unknown_nodes_are_refused(controller: list[list[str]]) -> None:
    with pytest.raises(RefusedError, match="no such node: node9"):
        nodes.select(load_cluster(LOCAL), "node[1,9]")
