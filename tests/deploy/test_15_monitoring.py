"""The local cluster's monitoring, deployed for real (inventories/local: `monitoring.host: localhost`):
Debian's Prometheus scraping Debian's node_exporter and cluster-cli's Slurm exporter, each listening
on the inventory's address only, with the cluster's alert rules and console pages."""

from __future__ import annotations

import json
import subprocess
import urllib.parse
import urllib.request

import pytest

from deployed import DeployedCluster, wait_for

from cluster_cli.exporters.text_format import samples_of
from cluster_cli.render.monitoring import NODE_JOB, PROMETHEUS_JOB, SLURM_JOB

pytestmark = pytest.mark.deploy

PROMETHEUS = "http://localhost:9090"
EXPORTER = "http://localhost:9446/metrics"
# The local inventory's monitoring ports (monitoring.ports' defaults).
PORTS = {"prometheus": 9090, "node_exporter": 9100, "slurm exporter": 9446}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def _api(path: str, **query: str) -> object:
    document = json.loads(_get(f"{PROMETHEUS}/api/v1/{path}?{urllib.parse.urlencode(query)}"))
    assert document["status"] == "success", document
    return document["data"]


def _exporter_value(text: str, metric: str, **labels: str) -> float:
    """The value of the one sample of ``metric`` with exactly ``labels`` in an exporter's text."""
    for name, found, value in samples_of(text):
        if name == metric and found == labels:
            return value
    raise AssertionError(f"no sample {metric} {labels} in the exporter's answer:\n{text}")


def _listening(port: int) -> set[str]:
    """The local addresses of the sockets that listen on ``port`` (IPv4 and IPv6), as ss prints them."""
    output = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, timeout=10,
                            check=True).stdout
    return {line.split()[3].rsplit(":", 1)[0] for line in output.splitlines() if line.strip()}


def test_every_monitoring_daemon_listens_on_the_inventory_address_only(deployed_cluster: DeployedCluster) -> None:
    # localhost's address: no socket on every address (0.0.0.0, [::], *), where others could scrape
    # what PrivateData hides from users
    for daemon, port in PORTS.items():
        addresses = _listening(port)
        assert addresses, f"{daemon} does not listen on port {port}"
        assert addresses <= {"127.0.0.1", "[::1]"}, f"{daemon} listens on {addresses}, not localhost only"


def test_prometheus_scrapes_every_target_and_loads_the_alert_rules(deployed_cluster: DeployedCluster) -> None:
    def all_up() -> list[dict] | None:
        targets = _api("targets")["activeTargets"]  # type: ignore[index]
        return targets if targets and all(target["health"] == "up" for target in targets) else None

    targets = wait_for(all_up, "every scrape target up", timeout=90)
    assert sorted(target["labels"]["job"] for target in targets) == sorted([NODE_JOB, PROMETHEUS_JOB, SLURM_JOB])
    node = next(target for target in targets if target["labels"]["job"] == NODE_JOB)
    assert node["labels"]["cluster_role"] == "compute", "the shared-mount rule selects compute hosts by this label"
    groups = _api("rules")["groups"]  # type: ignore[index]
    rules = {rule["name"] for group in groups for rule in group["rules"]}
    assert {"SlurmctldDown", "SlurmdbdDown", "SlurmNodesDown", "SlurmNodesDrainedNotByAdmin"} <= rules
    assert _api("query", query="up")["result"], "Prometheus answers queries"  # type: ignore[index]


def test_the_slurm_exporter_counts_what_sinfo_and_squeue_show(deployed_cluster: DeployedCluster) -> None:
    held = subprocess.run(["sbatch", "--hold", "--parsable", "--job-name=exporter-check", "--wrap", "true"],
                          capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    try:
        text = _get(EXPORTER)
        nodes = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%N %T"], capture_output=True, text=True,
                               timeout=30, check=True).stdout.split("\n")
        pending = subprocess.run(["squeue", "--all", "--noheader", "--states=PENDING", "--format=%i"],
                                 capture_output=True, text=True, timeout=30, check=True).stdout.split()
    finally:
        subprocess.run(["scancel", held], timeout=30, check=False)
    idle = [line for line in nodes if line.endswith(" idle")]
    assert _exporter_value(text, "cluster_slurm_up") == 1
    assert _exporter_value(text, "cluster_slurm_slurmdbd_up") == 1, "accounting is on: the exporter asks slurmdbd"
    assert _exporter_value(text, "cluster_slurm_nodes", partition="debug", state="idle") == len(idle) == 3
    assert _exporter_value(text, "cluster_slurm_gpus", partition="debug", state="total", type="fake") == 3
    assert held in pending
    assert _exporter_value(text, "cluster_slurm_pending_jobs", partition="debug", reason="JobHeldUser") == len(pending)


def test_prometheus_serves_the_console_pages_with_the_clusters_figures(deployed_cluster: DeployedCluster) -> None:
    def nodes_scraped() -> bool:
        return bool(_api("query", query="cluster_slurm_nodes")["result"])  # type: ignore[index]

    wait_for(nodes_scraped, "the Slurm exporter's figures in Prometheus", timeout=60)
    page = _get(f"{PROMETHEUS}/consoles/cluster-slurm.html")
    assert "local: Slurm" in page and "state=idle" in page, page[:2000]
