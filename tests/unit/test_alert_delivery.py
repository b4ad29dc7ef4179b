"""Alertmanager's delivery (monitoring.receivers, render/alertmanager_conf.py): the refusals before
any host is touched, the rendered configuration (a secret: the webhook URLs), and a real delivery:
Debian's Alertmanager, run from its package unpacked once (no daemon of the system), with the
rendered file, hands an alert to a webhook served by this test."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from unit_helpers import BASE, debian_program, load, problem, problems

from cluster_cli.bundle.make import _rendered as bundle_rendered_files
from cluster_cli.host_files import files_by_host
from cluster_cli.render import render_configs
from cluster_cli.render.alertmanager_conf import ALERTMANAGER_CONFIG, RECEIVER

CACHE = Path(os.environ.get("CLUSTER_CLI_ALERTMANAGER_CACHE", "/var/cache/cluster-cli/alertmanager"))
WEBHOOK = "http://127.0.0.1:{port}/hook/s3cret-token"


ALERTMANAGER = debian_program("prometheus-alertmanager", "prometheus-alertmanager", CACHE)


def _url_file(directory: Path, url: str, mode: int = 0o600) -> Path:
    path = directory / "webhook-url"
    path.write_text(url + "\n")
    path.chmod(mode)
    return path


def _inventory(url_file: Path, extra: str = "") -> str:
    return (BASE + "monitoring:\n  host: box\n  alertmanager: true\n  receivers:\n"
            f"    webhook_url_files: [{url_file}]\n" + extra)


def test_receivers_refused_at_their_lines(tmp_path: Path) -> None:
    private = _url_file(tmp_path, "https://hooks.example.org/T0/B0/x")
    text = BASE + f"monitoring:\n  host: box\n  receivers:\n    webhook_url_files: [{private}]\n"
    assert problems(text) == [problem(text, "receivers:", "monitoring.receivers",
                                      "Alertmanager delivers the alerts to the receivers: set monitoring.host and "
                                      "alertmanager: true")]
    text = BASE + "monitoring:\n  host: box\n  alertmanager: true\n  receivers: {}\n"
    assert problems(text) == [problem(text, "receivers: {}", "monitoring.receivers",
                                      "names no receiver: give webhook_url_files or email")]
    readable = tmp_path / "readable"
    readable.mkdir()
    _url_file(readable, "https://hooks.example.org/x", 0o644)
    text = _inventory(readable / "webhook-url")
    assert problems(text) == [problem(text, "webhook_url_files", "monitoring.receivers.webhook_url_files[0]",
                                      f"{readable}/webhook-url is readable by others (mode 0644): chmod 600 it")]
    other = tmp_path / "other"
    other.mkdir()
    _url_file(other, "hooks.example.org/x")
    text = _inventory(other / "webhook-url")
    assert problems(text) == [problem(text, "webhook_url_files", "monitoring.receivers.webhook_url_files[0]",
                                      f"{other}/webhook-url must hold an http:// or https:// URL without spaces")]
    text = _inventory(private, "    email: [oncall@example.org]\n")
    assert problems(text) == [problem(text, "email:", "monitoring.receivers.email",
                                      "mail goes through the site's relay: set smtp_smarthost (HOST:PORT) and smtp_from")]


def test_the_configuration_sends_every_alert_to_every_receiver_and_is_a_secret(tmp_path: Path) -> None:
    url = "https://hooks.example.org/T0/B0/s3cret"
    text = _inventory(_url_file(tmp_path, url), "    email: [oncall@example.org]\n    smtp_smarthost: mail.example.org:587\n"
                                                "    smtp_from: alertmanager@example.org\n")
    cluster = load(text)
    [rendered] = [item for item in render_configs(cluster, None) if item.path == ALERTMANAGER_CONFIG]
    assert rendered.secret and rendered.mode == 0o600
    config = json.loads(rendered.content)
    assert config["route"] == {"receiver": RECEIVER, "group_by": ["alertname", "cluster"], "group_wait": "30s",
                               "group_interval": "5m", "repeat_interval": "4h"}
    [receiver] = config["receivers"]
    assert receiver["webhook_configs"] == [{"url": url, "send_resolved": True}]
    assert receiver["email_configs"] == [{"to": "oncall@example.org", "send_resolved": True}]
    assert config["global"] == {"smtp_smarthost": "mail.example.org:587", "smtp_from": "alertmanager@example.org",
                                "smtp_require_tls": True}
    bundle_rendered_files(cluster, tmp_path / "bundle")  # what `cluster-cli bundle` carries: no secret
    assert (tmp_path / "bundle" / "ansible" / "inventory.yml").is_file()
    assert not (tmp_path / "bundle" / ALERTMANAGER_CONFIG).exists()
    host_file = next(item for item in files_by_host(cluster, {ALERTMANAGER_CONFIG: rendered.content}, b"k")["box"]
                     if item.source == ALERTMANAGER_CONFIG)
    assert host_file.path == "/etc/prometheus/alertmanager.yml" and host_file.secret


def test_without_receivers_debians_own_configuration_stays() -> None:
    cluster = load(BASE + "monitoring:\n  host: box\n  alertmanager: true\n")
    assert ALERTMANAGER_CONFIG not in {item.path for item in render_configs(cluster, None)}


class _Hook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[dict]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Hook.received.append({"path": self.path, **json.loads(body)})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[int]:
    _Hook.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.skipif(ALERTMANAGER is None, reason="needs Debian's prometheus-alertmanager (apt-get download as root)")
def test_alertmanager_delivers_an_alert_to_the_inventorys_webhook(tmp_path: Path, webhook: int) -> None:
    assert ALERTMANAGER is not None
    # a short group_wait (monitoring.receivers.group_wait): the test waits for the first notice
    cluster = load(_inventory(_url_file(tmp_path, WEBHOOK.format(port=webhook)), "    group_wait: 1s\n"))
    [rendered] = [item for item in render_configs(cluster, None) if item.path == ALERTMANAGER_CONFIG]
    config = tmp_path / "alertmanager.yml"
    config.write_text(rendered.content)
    amtool = ALERTMANAGER.parent / "amtool"
    checked = subprocess.run([str(amtool), "check-config", str(config)], capture_output=True, text=True, timeout=60,
                             check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    port = _free_port()
    daemon = subprocess.Popen([str(ALERTMANAGER), f"--config.file={config}", f"--storage.path={tmp_path / 'data'}",
                               f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        alert = [{"labels": {"alertname": "SlurmNodesDown", "cluster": "test", "severity": "critical"},
                  "annotations": {"summary": "1 node down"}}]
        _post_when_up(f"http://127.0.0.1:{port}/api/v2/alerts", alert)
        deadline = time.monotonic() + 30
        while not _Hook.received and time.monotonic() < deadline and daemon.poll() is None:
            time.sleep(0.5)
    finally:
        daemon.terminate()
        _, errors = daemon.communicate(timeout=30)
    assert _Hook.received, errors[-3000:]
    [delivered] = _Hook.received
    assert delivered["path"] == "/hook/s3cret-token" and delivered["receiver"] == RECEIVER
    assert delivered["status"] == "firing" and delivered["groupLabels"] == {"alertname": "SlurmNodesDown", "cluster": "test"}
    assert delivered["alerts"][0]["annotations"] == {"summary": "1 node down"}


def _post_when_up(url: str, document: list[dict]) -> None:
    deadline = time.monotonic() + 30
    while True:
        request = urllib.request.Request(url, data=json.dumps(document).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
