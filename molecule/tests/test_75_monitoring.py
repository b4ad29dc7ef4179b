"""The monitoring roles on systemd hosts (scenarios whose inventory names a monitoring host: the
`default` one): Prometheus scrapes every host's node_exporter and the Slurm exporter with every
target up, each exporter listens on its host's address only, and the Slurm exporter's figures
equal sinfo's at the same moment. (That the three units run and are enabled: test_10_state.)"""

from __future__ import annotations

import json
import time

import pytest
from conftest import ClusterView

from cluster_cli.exporters.slurm_metrics import node_state
from cluster_cli.exporters.text_format import samples_of
from cluster_cli.render.monitoring import nvml_gpu_hosts

# Reads a URL on the host itself (the bed's hosts have Python, not curl).
FETCH = "python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())'"
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
