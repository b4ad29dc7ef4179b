"""The cluster's dashboards, each panel written once: Grafana dashboard JSON for sites that run
Grafana (Debian has none), and Prometheus console templates (served by Prometheus itself at
/consoles/, `--web.console.templates`) for sites that do not. Both show the exporters' metrics
(docs/monitoring.md); tests/unit/test_dashboards.py asks a real Prometheus every panel's query.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

from cluster_cli.cluster import Cluster


@dataclass(frozen=True)
class Panel:
    title: str
    expr: str  # PromQL
    legend: str  # the labels that tell the series apart, Grafana's "{{label}}" form
    unit: str = "short"  # Grafana's unit id
    kind: str = "timeseries"  # or "stat": one number now


@dataclass(frozen=True)
class Dashboard:
    slug: str  # file names: grafana/SLUG.json, consoles/SLUG.html
    title: str
    panels: tuple[Panel, ...]


SLURM = Dashboard("cluster-slurm", "Slurm", (
    Panel("slurmctld answers", "min(cluster_slurm_up)", "", kind="stat"),
    Panel("Nodes by state", "sum by (state) (cluster_slurm_nodes)", "{{state}}"),
    Panel("Drained nodes by reason", "sum by (reason, by) (cluster_slurm_drained_nodes)", "{{reason}} ({{by}})"),
    Panel("GPUs allocated", 'sum by (partition, type) (cluster_slurm_gpus{state="allocated"})',
          "{{partition}} {{type}}"),
    Panel("GPUs allocated, share of all", 'sum by (partition) (cluster_slurm_gpus{state="allocated"}) '
          '/ sum by (partition) (cluster_slurm_gpus{state="total"})', "{{partition}}", unit="percentunit"),
    Panel("CPUs allocated, share of all", 'sum by (partition) (cluster_slurm_cpus{state="allocated"}) '
          '/ sum by (partition) (cluster_slurm_cpus{state="total"})', "{{partition}}", unit="percentunit"),
    Panel("Jobs by account and state", "sum by (account, state) (cluster_slurm_jobs)", "{{account}} {{state}}"),
    Panel("Pending jobs by reason", "sum by (reason) (cluster_slurm_pending_jobs)", "{{reason}}"),
    Panel("Longest wait of a pending job", "max by (partition) (cluster_slurm_queue_wait_max_seconds)",
          "{{partition}}", unit="s"),
    Panel("Scheduler: jobs started since sdiag's reset", 'cluster_slurm_scheduler{figure="jobs_started"}', "started"),
    Panel("Exporter scrape time", "max(cluster_slurm_scrape_seconds)", "seconds", unit="s"),
))
GPUS = Dashboard("cluster-gpus", "GPUs", (
    Panel("GPUs seen, against the inventory", "sum by (instance) (cluster_gpu_expected) "
          "- count by (instance) (cluster_gpu_info)", "{{instance}} missing"),
    Panel("Utilization", "cluster_gpu_utilization_ratio", "{{instance}} GPU {{gpu}}", unit="percentunit"),
    Panel("Memory used, share of all", "cluster_gpu_memory_used_bytes / cluster_gpu_memory_total_bytes",
          "{{instance}} GPU {{gpu}}", unit="percentunit"),
    Panel("Temperature", "cluster_gpu_temperature_celsius", "{{instance}} GPU {{gpu}}", unit="celsius"),
    Panel("Power", "cluster_gpu_power_watts", "{{instance}} GPU {{gpu}}", unit="watt"),
    Panel("ECC errors in the last hour", "increase(cluster_gpu_ecc_errors_total[1h])",
          "{{instance}} GPU {{gpu}} {{type}}"),
    Panel("Slurm jobs on GPUs", 'count by (slurm_job_id) (cluster_gpu_slurm_job{slurm_job_id!=""})',
          "job {{slurm_job_id}}"),
))
DASHBOARDS = (SLURM, GPUS)


def grafana_dashboard(cluster: Cluster, dashboard: Dashboard) -> str:
    """A dashboard to import in Grafana (Dashboards > Import): its Prometheus is chosen there, as
    the `datasource` variable."""
    source = {"type": "prometheus", "uid": "${datasource}"}
    panels = [
        {
            "id": index + 1,
            "type": panel.kind,
            "title": panel.title,
            "datasource": source,
            "gridPos": {"h": 8, "w": 12, "x": (index % 2) * 12, "y": (index // 2) * 8},
            "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
            "targets": [{"refId": "A", "datasource": source, "expr": panel.expr, "legendFormat": panel.legend}],
        }
        for index, panel in enumerate(dashboard.panels)
    ]
    document = {
        "title": f"{cluster.name}: {dashboard.title}",
        "uid": f"{cluster.name}-{dashboard.slug}"[:40],
        "tags": ["cluster-cli", cluster.name],
        "schemaVersion": 39,
        "time": {"from": "now-24h", "to": "now"},
        "refresh": "1m",
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
    }
    return json.dumps(document, indent=2) + "\n"


def console_template(cluster: Cluster, dashboard: Dashboard) -> str:
    """A page Prometheus serves at /consoles/SLUG.html: each panel's query now, as a table. Go
    templates quote the query in backticks (PromQL has none)."""
    title = html.escape(f"{cluster.name}: {dashboard.title}")
    parts = [f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title></head><body>",
             f"<h1>{title}</h1>"]
    for panel in dashboard.panels:
        parts += [
            f"<h2>{html.escape(panel.title)}</h2>",
            f"<p><code>{html.escape(panel.expr)}</code></p>",
            "<table>",
            f"{{{{ range query `{panel.expr}` }}}}"
            "<tr><td>{{ range $name, $value := .Labels }}{{ $name }}={{ $value }} {{ end }}</td>"
            "<td>{{ .Value }}</td></tr>"
            "{{ else }}<tr><td>no data</td></tr>{{ end }}",
            "</table>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def render_dashboards(cluster: Cluster) -> dict[str, str]:
    """Build directory path -> text of every dashboard, for Grafana and as a console template."""
    files = {}
    for dashboard in DASHBOARDS:
        files[f"monitoring/grafana/{dashboard.slug}.json"] = grafana_dashboard(cluster, dashboard)
        files[f"monitoring/consoles/{dashboard.slug}.html"] = console_template(cluster, dashboard)
    return files
