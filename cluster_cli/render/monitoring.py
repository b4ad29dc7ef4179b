"""What the monitoring roles install (docs/monitoring.md), rendered once on the control node: the
monitoring host's Prometheus configuration, its scrape targets taken from the inventory, and the
exporters' code for the primary controller (roles/slurm_exporter) and the hosts whose GPUs NVML
reads (roles/gpu_exporter). Only for a cluster with `monitoring.host`.

Prometheus' files land in PROMETHEUS_DIR on the monitoring host (roles/prometheus); the exporters'
modules in EXPORTER_DIR on the controller and the GPU hosts, which run them with ``python -m`` from
there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster_cli.cluster import Cluster, ManagedHost
from cluster_cli.render.common import json_text

MONITORING_BUILD_DIR = "monitoring"
PROMETHEUS_CONFIG = "prometheus.yml"
ALERT_RULES = "cluster-alerts.yml"
#: Where roles/prometheus puts the rendered files on the monitoring host (Debian's own directory).
PROMETHEUS_DIR = "/etc/prometheus"
#: Where roles/slurm_exporter puts the exporter's modules on the primary controller.
EXPORTER_DIR = "/usr/local/lib/cluster-cli-exporters"
EXPORTER_BUILD_DIR = f"{MONITORING_BUILD_DIR}/exporter"
#: The modules the Slurm exporter imports (standard library only beyond these), as the package lays them out.
EXPORTER_MODULES = (
    "cluster_cli/__init__.py",
    "cluster_cli/hostlist.py",
    "cluster_cli/node_states.py",
    "cluster_cli/exporters/__init__.py",
    "cluster_cli/exporters/text_format.py",
    "cluster_cli/exporters/slurm_metrics.py",
    "cluster_cli/exporters/gpu_metrics.py",
)
#: The scrape job names; the dashboards and alert rules select by metric name, not by job.
NODE_JOB, SLURM_JOB, GPU_JOB, PROMETHEUS_JOB = "node", "slurm", "gpu", "prometheus"


def nvml_gpu_hosts(cluster: Cluster) -> list[ManagedHost]:
    """The hosts whose GPUs NVML reads: roles/gpu_exporter's."""
    return [host for host in cluster.hosts.values() if host.has_nvml_gpus]


def cluster_role(host: ManagedHost) -> str:
    """The target label ``cluster_role`` of a host's node_exporter: compute wins (the alert rule on
    shared mounts selects ``cluster_role="compute"``), then controller, database, login, monitoring."""
    for role in ("compute", "controller", "database", "login", "monitoring"):
        if role in host.roles:
            return role
    return "other"


def _targets_by_role(cluster: Cluster, port: int) -> list[dict[str, Any]]:
    by_role: dict[str, list[str]] = {}
    for host in cluster.hosts.values():
        by_role.setdefault(cluster_role(host), []).append(f"{host.address}:{port}")
    return [{"targets": targets, "labels": {"cluster_role": role}} for role, targets in by_role.items()]


def prometheus_config(cluster: Cluster) -> dict[str, Any]:
    """Prometheus' configuration: every host's node_exporter, the Slurm exporter, the GPU exporter of
    each host whose GPUs NVML reads, Prometheus itself, the cluster's alert rules, Alertmanager where
    the inventory runs one."""
    monitoring = cluster.inventory.monitoring
    assert monitoring.host is not None
    ports = monitoring.ports
    server = cluster.hosts[monitoring.host].address
    controller = cluster.hosts[cluster.inventory.controllers.primary].address
    interval = f"{monitoring.scrape_interval_s}s"
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "evaluation_interval": interval,
                   "external_labels": {"cluster": cluster.name}},
        "rule_files": [f"{PROMETHEUS_DIR}/{ALERT_RULES}"],
        "scrape_configs": [
            {"job_name": PROMETHEUS_JOB, "static_configs": [{"targets": [f"{server}:{ports.prometheus}"]}]},
            {"job_name": NODE_JOB, "static_configs": _targets_by_role(cluster, ports.node)},
            # The Slurm exporter cuts each of its Slurm calls at 10 s and makes them in turn: Prometheus
            # waits for it as long as it may (a scrape's timeout cannot exceed its interval).
            {"job_name": SLURM_JOB, "scrape_timeout": interval,
             "static_configs": [{"targets": [f"{controller}:{ports.slurm}"]}]},
        ],
    }
    gpu_hosts = nvml_gpu_hosts(cluster)
    if gpu_hosts:
        config["scrape_configs"].append(
            {"job_name": GPU_JOB, "static_configs": [{"targets": [f"{host.address}:{ports.gpu}" for host in gpu_hosts]}]}
        )
    if monitoring.alertmanager:
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [f"{server}:{ports.alertmanager}"]}]}]}
    return config


def exporter_files() -> dict[str, str]:
    """The Slurm exporter's modules, by their build directory path, as this cluster-cli has them."""
    root = Path(__file__).resolve().parents[2]  # the directory holding the cluster_cli package
    return {f"{EXPORTER_BUILD_DIR}/{module}": (root / module).read_text(encoding="utf-8") for module in EXPORTER_MODULES}


def render_monitoring(cluster: Cluster) -> dict[str, str]:
    """The build directory's files for the monitoring roles; none without `monitoring.host`."""
    if cluster.inventory.monitoring.host is None:
        return {}
    # JSON, which Prometheus reads as the YAML it is
    files = {f"{MONITORING_BUILD_DIR}/{PROMETHEUS_CONFIG}": json_text(prometheus_config(cluster)) + "\n"}
    files.update(exporter_files())
    return files
