"""deploy's --limit (the user's, or the plan's hosts) keeps site.yml's control-node preflight."""

from __future__ import annotations

from pathlib import Path

from unit_helpers import BASE, load

from cluster_cli.deploy import limit_with_control_node
from cluster_cli.loader import load_cluster

REPO = Path(__file__).resolve().parents[2]


def test_a_limit_gets_the_control_node_added() -> None:
    # Ansible leaves the implicit localhost out of a limit that does not name it: the preflight
    # play (hosts: localhost) would be skipped, the role argument checks with it.
    assert limit_with_control_node("gpu1,gpu2", load(BASE)) == "gpu1,gpu2,localhost"


def test_no_limit_stays_none() -> None:
    assert limit_with_control_node(None, load(BASE)) is None
    assert limit_with_control_node("", load(BASE)) == ""


def test_a_cluster_host_called_localhost_is_not_added() -> None:
    # The local cluster's one host is localhost: naming it would widen the limit to that host.
    cluster = load_cluster(REPO / "inventories" / "local" / "inventory.yaml")
    assert "localhost" in cluster.hosts
    assert limit_with_control_node("localhost", cluster) == "localhost"
