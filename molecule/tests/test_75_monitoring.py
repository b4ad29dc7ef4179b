"""The monitoring roles on systemd hosts (scenarios whose inventory names a monitoring host: the
`default` one): Prometheus scrapes every host's node_exporter and the Slurm exporter with every
target up, each exporter listens on its host's address only, the Slurm exporter's figures equal
sinfo's at the same moment, every panel of the Slurm dashboard has data in the bed's Prometheus,
and an admin's drain matches nothing of the not-by-an-admin alert. (That the three units run and
are enabled: test_10_state; that a killed slurmd fires SlurmNodesDown: test_40_faults.)"""

from __future__ import annotations

import json
import shlex
import time
import urllib.parse

import pytest
from conftest import FETCH, ClusterView

from cluster_cli.exporters.slurm_metrics import node_state
from cluster_cli.exporters.text_format import samples_of
from cluster_cli.render.dashboards import SLURM
from cluster_cli.render.monitoring import nvml_gpu_hosts

# The local addresses of the sockets listening on a port, from /proc/net/tcp (IPv4; hex, little-endian).
LISTENERS = ("python3 -c 'import sys, socket, struct\n"
             "for line in open(\"/proc/net/tcp\").read().splitlines()[1:]:\n"
             "    local, state = line.split()[1], line.split()[3]\n"
             "    address, port = local.split(\":\")\n"
             "    if state == \"0A\" and int(port, 16) == int(sys.argv[1]):\n"
             "        print(socket.inet_ntoa(struct.pack(\"<I\", int(address, 16))))' ")


@pytest.fixture(scope="module")
def monitored(view: ClusterView) -> ClusterView:
    if view.cluster.inventory.monitoring.host is None:
        pytest.skip("this scenario's inventory has no monitoring host")
    return view


def _fetch(view: ClusterView, host: str, url: str) -> str:
    done = view.hosts[host].run(f"{FETCH} {url}")
    assert done.rc == 0, f"{host}: {url}: {done.stderr}"
    return done.stdout


def test_every_exporter_listens_on_its_hosts_address_only(monitored: ClusterView) -> None:
    ports = monitored.cluster.inventory.monitoring.ports
    primary = monitored.cluster.inventory.controllers.primary
    for name, host in monitored.cluster.hosts.items():
        for port in [ports.node] + ([ports.slurm] if name == primary else []):
            found = set(monitored.hosts[name].run(f"{LISTENERS}{port}").stdout.split())
            assert found == {host.address}, f"{name}: port {port} listens on {found}, not {host.address} only"


def test_prometheus_scrapes_every_target_up(monitored: ClusterView) -> None:
    inventory = monitored.cluster.inventory
    server = inventory.monitoring.host
    url = f"http://{monitored.cluster.hosts[server].address}:{inventory.monitoring.ports.prometheus}/api/v1/targets"
    deadline = time.monotonic() + 120
    while True:
        targets = json.loads(_fetch(monitored, server, url))["data"]["activeTargets"]
        down = [(target["scrapeUrl"], target["lastError"]) for target in targets if target["health"] != "up"]
        if targets and not down or time.monotonic() > deadline:
            break
        time.sleep(5)
    assert not down, f"targets not up after 120 s: {down}"
    # every host's node_exporter, the Slurm exporter, Prometheus itself and the GPU exporters
    expected = len(monitored.cluster.hosts) + 2 + len(nvml_gpu_hosts(monitored.cluster))
    assert len(targets) == expected, [target["scrapeUrl"] for target in targets]


def test_the_slurm_exporter_counts_the_nodes_sinfo_shows(monitored: ClusterView) -> None:
    inventory = monitored.cluster.inventory
    primary = inventory.controllers.primary
    url = f"http://{monitored.cluster.hosts[primary].address}:{inventory.monitoring.ports.slurm}/metrics"
    text = _fetch(monitored, primary, url)
    sinfo = monitored.hosts[primary].run("sinfo --noheader --Node --format='%N %P %T'").stdout.split("\n")
    counted: dict[tuple[str, str], int] = {}
    for line in filter(None, sinfo):
        _, partition, state = line.split()
        key = (partition.rstrip("*"), node_state(state))  # idle* -> idle+not_responding, as the exporter labels it
        counted[key] = counted.get(key, 0) + 1
    served = {(labels["partition"], labels["state"]): int(value)
              for name, labels, value in samples_of(text) if name == "cluster_slurm_nodes"}
    assert served == counted, f"exporter {served}, sinfo {counted}"
    assert "cluster_slurm_up 1" in text and "cluster_slurm_slurmdbd_up 1" in text


def test_every_slurm_dashboard_panel_has_data_and_an_admins_drain_fires_nothing(monitored: ClusterView) -> None:
    """Every panel of the Slurm dashboard (render/dashboards.py, the same queries as the Grafana
    JSON and the console page) asked of the bed's Prometheus, with a node drained by an admin and
    a held job, so that the drain and pending panels have something to show; and that drain is
    seen by the exporter (by root) but matches nothing of SlurmNodesDrainedNotByAdmin's rule."""
    node = monitored.nodes[-1]
    reason = "cluster-cli test: an admin's maintenance"
    interval = monitored.cluster.inventory.monitoring.scrape_interval_s
    monitored.run(monitored.controller, f"scontrol update nodename={node} state=drain reason={shlex.quote(reason)}")
    held = monitored.slurm("sbatch --parsable --hold -o /dev/null --wrap true")
    try:
        def drain_seen() -> bool:
            found = monitored.prometheus("/api/v1/query?query=cluster_slurm_drained_nodes")["result"]
            return any(item["metric"].get("reason") == reason for item in found)
        monitored.wait_until("the exporter's drained nodes show the admin's drain", drain_seen, timeout=3 * interval + 5)
        [drained] = [item["metric"] for item in monitored.prometheus("/api/v1/query?query=cluster_slurm_drained_nodes")["result"]
                     if item["metric"].get("reason") == reason]
        assert drained["by"] == "root", drained
        rule = _rule(monitored, "SlurmNodesDrainedNotByAdmin")
        assert _query(monitored, rule["expr"]) == [], rule["expr"]
        monitored.wait_until("the held job is scraped",
                             lambda: bool(_query(monitored, "cluster_slurm_pending_jobs")), timeout=3 * interval + 5)
        empty = [panel.title for panel in SLURM.panels if not _query(monitored, panel.expr)]
        assert empty == [], f"panels without data on the bed: {empty}"
    finally:
        monitored.run(monitored.submit, f"scancel {held}", check=False)
        monitored.run(monitored.controller, f"scontrol update nodename={node} state=resume")
    monitored.wait_nodes_idle()


def _rule(view: ClusterView, name: str) -> dict:
    """The rule ``name`` of the alert rules the deploy installed (the build directory's copy)."""
    rules = json.loads((view.build_dir / "monitoring" / "cluster-alerts.yml").read_text())
    return next(rule for group in rules["groups"] for rule in group["rules"] if rule["alert"] == name)


def _query(view: ClusterView, expr: str) -> list:
    return view.prometheus(f"/api/v1/query?query={urllib.parse.quote(expr)}")["result"]
