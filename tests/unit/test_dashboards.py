"""The dashboards (render/dashboards.py) against a real Prometheus: Debian's prometheus binary
(unpacked as test_alert_rules.py unpacks promtool, no package installed) scrapes what the two
exporters serve, over loopback: the Slurm exporter's figures from the outputs Slurm 22.05 printed
(tests/unit/data/slurm_metrics) and a GPU exporter's scrape of two GPUs. Every panel's query must
return data, and Prometheus must serve each console template with a value in every table."""

from __future__ import annotations

import html
import json
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from test_alert_rules import INVENTORY, PROMTOOL
from test_slurm_metrics import SUBMITTED, recorded

from cluster_cli.exporters import gpu_metrics, slurm_metrics
from cluster_cli.loader import load_cluster_text
from cluster_cli.render.dashboards import DASHBOARDS, render_dashboards

PROMETHEUS = PROMTOOL.parent / "prometheus" if PROMTOOL else None
pytestmark = pytest.mark.skipif(PROMETHEUS is None or not PROMETHEUS.is_file(),
                                reason="needs Debian's prometheus binary (the package unpacked, as for promtool)")
CLUSTER = load_cluster_text(INVENTORY, "alerts.yaml")


def _gpu_text() -> str:
    scrape = gpu_metrics.Scrape()
    scrape.add("expected", {}, 2)
    for gpu, job in (("0", "4242"), ("1", "")):
        labels = {"gpu": gpu, "uuid": f"GPU-{gpu}"}
        scrape.add("info", {**labels, "name": "NVIDIA H100", "driver": "550.54"}, 1)
        for metric, value in (("utilization_ratio", 0.5), ("memory_used_bytes", 1 << 30),
                              ("memory_total_bytes", 80 << 30), ("temperature_celsius", 41), ("power_watts", 120.5)):
            scrape.add(metric, labels, value)
        scrape.add("ecc_errors_total", {**labels, "type": "corrected"}, 0)
        scrape.add("slurm_job", {**labels, "slurm_job_id": job}, 1)
    return gpu_metrics.exposition(scrape)


EXPOSITIONS = {
    "/slurm": slurm_metrics.exposition(slurm_metrics.Exporter(run=recorded, clock=lambda: SUBMITTED + 9).scrape()),
    "/gpu": _gpu_text(),
}


class _Exporters(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = EXPOSITIONS.get(self.path, "").encode()
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read()


def _query(base: str, expr: str) -> list[dict]:
    answer = json.loads(_get(f"{base}/api/v1/query?query={urllib.parse.quote(expr)}"))
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a Prometheus that has scraped both exporters at least three times."""
    root = tmp_path_factory.mktemp("prometheus")
    for path, text in render_dashboards(CLUSTER).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    exporters = ThreadingHTTPServer(("127.0.0.1", 0), _Exporters)
    threading.Thread(target=exporters.serve_forever, daemon=True).start()
    target = f"127.0.0.1:{exporters.server_address[1]}"
    jobs = [{"job_name": name, "metrics_path": f"/{name}", "scrape_interval": "1s",
             "static_configs": [{"targets": [target]}]} for name in ("slurm", "gpu")]
    (root / "prometheus.yml").write_text(json.dumps({"scrape_configs": jobs}))
    listen = f"127.0.0.1:{_port()}"
    daemon = subprocess.Popen(
        [str(PROMETHEUS), f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address={listen}", f"--web.console.templates={root / 'monitoring' / 'consoles'}",
         f"--web.console.libraries={root / 'monitoring' / 'consoles'}"],
        stdout=subprocess.DEVNULL, stderr=(root / "prometheus.log").open("w"))
    base = f"http://{listen}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if len(_query(base, "count_over_time(up[1m]) >= 3")) == 2:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            raise AssertionError(f"Prometheus did not scrape both exporters: {(root / 'prometheus.log').read_text()[-2000:]}")
        yield base
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        exporters.shutdown()


@pytest.mark.parametrize("panel", [panel for dashboard in DASHBOARDS for panel in dashboard.panels],
                         ids=lambda panel: panel.title)
def test_every_panels_query_returns_data(prometheus: str, panel) -> None:
    assert _query(prometheus, panel.expr), f"no data for {panel.title!r}: {panel.expr}"


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=lambda dashboard: dashboard.slug)
def test_prometheus_serves_each_console_with_a_value_in_every_table(prometheus: str, dashboard) -> None:
    page = _get(f"{prometheus}/consoles/{dashboard.slug}.html").decode()
    assert "error executing template" not in page and "no data" not in page, page[:3000]
    assert page.count("<table>") == len(dashboard.panels) and all(html.escape(panel.title) in page for panel in dashboard.panels)


@pytest.mark.parametrize("dashboard", DASHBOARDS, ids=lambda dashboard: dashboard.slug)
def test_the_grafana_dashboard_asks_each_panels_query_of_the_chosen_prometheus(dashboard) -> None:
    document = json.loads(render_dashboards(CLUSTER)[f"monitoring/grafana/{dashboard.slug}.json"])
    assert [variable["type"] for variable in document["templating"]["list"]] == ["datasource"]
    assert [(panel["title"], panel["targets"][0]["expr"]) for panel in document["panels"]] == [
        (panel.title, panel.expr) for panel in dashboard.panels]
    sources = [panel["datasource"] for panel in document["panels"]] + [
        panel["targets"][0]["datasource"] for panel in document["panels"]]
    assert all(source == {"type": "prometheus", "uid": "${datasource}"} for source in sources)
