"""What the monitoring roles get from the inventory (render/monitoring.py): Prometheus' scrape
targets, checked by Prometheus' own promtool, the exporters' modules, the hosts each daemon runs on
(the GPU exporter where NVML reads the GPUs), and the inventory mistakes refused before any host is
touched."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_alert_rules import PROMTOOL
from unit_helpers import BASE, SHIPPED_INVENTORIES, edit, line_of, load, problem, problems

from cluster_cli.ansible.variables import monitoring_variables
from cluster_cli.bundle.packages import debian_packages, pip_requirements
from cluster_cli.host_files import files_by_host
from cluster_cli.loader import load_cluster
from cluster_cli.render import render_configs
from cluster_cli.render.ansible_inventory import inventory_document
from cluster_cli.render.monitoring import (
    EXPORTER_BUILD_DIR, EXPORTER_MODULES, prometheus_config, render_monitoring,
)

REPO = Path(__file__).resolve().parents[2]
MONITORED = BASE + "monitoring:\n  host: box\n  alertmanager: true\n"


def _targets(config: dict, job: str) -> dict[str, list[str]]:
    [scrape] = [scrape for scrape in config["scrape_configs"] if scrape["job_name"] == job]
    return {entry.get("labels", {}).get("cluster_role", ""): entry["targets"] for entry in scrape["static_configs"]}


def test_prometheus_scrapes_every_hosts_node_exporter_by_role_and_the_slurm_exporter_on_the_primary() -> None:
    config = prometheus_config(load(MONITORED))
    assert _targets(config, "node") == {
        "controller": ["10.0.0.1:9100"],  # head: controller, database and login
        "compute": ["10.0.0.2:9100"] + [f"10.0.1.{index}:9100" for index in range(1, 5)],  # box runs dev1-2
    }
    assert _targets(config, "slurm") == {"": ["10.0.0.1:9446"]}
    assert _targets(config, "prometheus") == {"": ["10.0.0.2:9090"]}
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["10.0.0.2:9093"]
    assert config["rule_files"] == ["/etc/prometheus/cluster-alerts.yml"]
    assert config["global"]["external_labels"] == {"cluster": "test"}


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian's prometheus package)")
def test_promtool_accepts_the_rendered_configuration(tmp_path: Path) -> None:
    files = render_monitoring(load(MONITORED))
    config = tmp_path / "prometheus.yml"
    config.write_text(files["monitoring/prometheus.yml"])
    done = subprocess.run([str(PROMTOOL), "check", "config", "--syntax-only", str(config)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_monitoring_host_renders_nothing_and_runs_no_monitoring_daemon() -> None:
    cluster = load(BASE)
    assert render_monitoring(cluster) == {}
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    assert children["monitoring"] == children["node_exporter"] == children["slurm_exporter"] == {"hosts": {}}
    assert not {"prometheus", "prometheus-node-exporter"} & set(debian_packages(cluster))


def test_the_groups_packages_and_variables_of_a_monitored_cluster() -> None:
    cluster = load(MONITORED)
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    assert list(children["monitoring"]["hosts"]) == ["box"]
    assert sorted(children["node_exporter"]["hosts"]) == sorted(cluster.hosts)
    assert list(children["slurm_exporter"]["hosts"]) == ["head"]
    assert {"prometheus", "prometheus-node-exporter", "prometheus-alertmanager"} <= set(debian_packages(cluster))
    variables = monitoring_variables(cluster, Path("/build"))
    assert variables["prometheus_config_src"] == "/build/monitoring"
    assert variables["slurm_exporter_src"] == "/build/monitoring/exporter"
    assert variables["slurm_exporter_accounting"] is True and variables["prometheus_alertmanager"] is True


def test_the_exporters_modules_are_this_packages_and_run_alone(tmp_path: Path) -> None:
    files = render_monitoring(load(MONITORED))
    modules = {path.removeprefix(f"{EXPORTER_BUILD_DIR}/"): text for path, text in files.items()
               if path.startswith(f"{EXPORTER_BUILD_DIR}/")}
    assert sorted(modules) == sorted(EXPORTER_MODULES)
    for module, text in modules.items():
        assert text == (REPO / module).read_text()
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text(text)
    # as roles/slurm_exporter runs it: only its own copy on the path (-I: no site-packages, no cwd)
    done = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "import cluster_cli.exporters.slurm_metrics as m; print(m.__file__)", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.startswith(str(tmp_path)), done.stdout + done.stderr


def test_plan_compares_prometheus_files_on_the_monitoring_host_and_the_exporter_on_the_primary() -> None:
    cluster = load(MONITORED)
    rendered = {item.path: item.content for item in render_configs(cluster, "password-123456")}
    files = files_by_host(cluster, rendered, b"k" * 1024)
    box = {item.path for item in files["box"]}
    head = {item.path for item in files["head"]}
    assert {"/etc/prometheus/prometheus.yml", "/etc/prometheus/cluster-alerts.yml",
            "/etc/prometheus/consoles/cluster-slurm.html"} <= box
    assert "/usr/local/lib/cluster-cli-exporters/cluster_cli/exporters/slurm_metrics.py" in head
    assert not any(path.startswith("/etc/prometheus/") for path in head)
    assert not any(path.startswith("/usr/local/lib/cluster-cli-exporters/") for path in box)  # fake GPUs only
    # roles/gpu_exporter copies the same modules to each host whose GPUs NVML reads
    assert "/usr/local/lib/cluster-cli-exporters/cluster_cli/exporters/gpu_metrics.py" in {item.path for item in files["gpu1"]}


def test_a_monitoring_host_that_is_not_an_inventory_host_is_refused() -> None:
    text = BASE + "monitoring:\n  host: nowhere\n"
    assert problems(text) == [problem(text, "host: nowhere", "monitoring.host",
                                      "host 'nowhere' is neither declared under hosts nor a compute node")]


def test_a_monitoring_port_taken_by_a_slurmd_of_the_same_host_is_refused() -> None:
    text = MONITORED + "  ports:\n    node: 17002\n"
    assert problems(text) == [problem(text, "node: 17002", "monitoring.ports.node",
                                      "port 17002 on host 'box' is used by both slurmd of dev2 and node_exporter")]


def test_a_retention_prometheus_would_not_read_is_refused() -> None:
    text = edit(MONITORED, "  alertmanager: true\n", "  retention: 2 weeks\n")
    [found] = problems(text)
    assert found.startswith(f"inv.yaml:{len(text.splitlines())}: monitoring.retention:"), found


def test_the_rendered_config_is_json_prometheus_reads_as_yaml() -> None:
    text = render_monitoring(load(MONITORED))["monitoring/prometheus.yml"]
    assert json.loads(text) == prometheus_config(load(MONITORED))


def test_the_gpu_exporter_runs_where_nvml_reads_the_gpus_and_not_beside_fake_ones() -> None:
    """BASE's gpu1-4 have A100s (roles/gpu_exporter there); box's dev1-2 have fake device files."""
    cluster = load(MONITORED)
    assert _targets(prometheus_config(cluster), "gpu") == {"": [f"10.0.1.{index}:9445" for index in range(1, 5)]}
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    assert list(children["gpu_exporter"]["hosts"]) == ["gpu1", "gpu2", "gpu3", "gpu4"]
    variables = monitoring_variables(cluster, Path("/build"))
    assert (variables["gpu_exporter_src"], variables["gpu_exporter_port"]) == ("/build/monitoring/exporter", 9445)
    assert "python3-venv" in debian_packages(cluster)
    assert pip_requirements(cluster)[-1].startswith("nvidia-ml-py==")
    fake_only = load_cluster(SHIPPED_INVENTORIES["local"])  # monitoring on, fake GPUs only
    assert "gpu" not in [scrape["job_name"] for scrape in prometheus_config(fake_only)["scrape_configs"]]
    assert not any(pin.startswith("nvidia-ml-py") for pin in pip_requirements(fake_only))
    unmonitored = inventory_document(load(BASE))["all"]["children"]["cluster"]["children"]
    assert unmonitored["gpu_exporter"] == {"hosts": {}}


def test_a_gpu_exporter_port_taken_by_a_slurmd_of_a_gpu_host_is_refused() -> None:
    text = MONITORED + "  ports:\n    gpu: 6818\n"
    found = problems(text)
    assert found[0] == problem(text, "gpu: 6818", "monitoring.ports.gpu",
                               "port 6818 on host 'gpu1' is used by both slurmd of gpu1 and the GPU exporter")


def test_an_alert_window_of_an_unknown_alert_or_not_a_duration_is_refused() -> None:
    text = MONITORED + "  alert_for:\n    SlurmNodeDown: 10m\n    SlurmctldDown: 5 minutes\n"
    found = problems(text)
    assert len(found) == 2, found
    assert found[0].startswith(f"inv.yaml:{line_of(text, 'SlurmNodeDown: 10m')}: monitoring.alert_for.SlurmNodeDown:")
    assert "'SlurmNodeDown' is not one of the cluster's alerts" in found[0]
    assert found[1].startswith(f"inv.yaml:{line_of(text, 'SlurmctldDown: 5 minutes')}: monitoring.alert_for.SlurmctldDown:")
    assert "'5 minutes' is not a Prometheus duration" in found[1]
