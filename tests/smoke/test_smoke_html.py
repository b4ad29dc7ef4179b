"""The smoke report as an HTML page (cluster_cli.smoke_control.html_report.py, `smoke --html`): every check
of the JSON report on the page with its verdict and figure, the charts drawn from the details,
an earlier report's figures beside the new ones; rendered by a real headless Chromium (Debian's),
which fetches nothing from the network while it does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from cluster_cli.cli import main
from cluster_cli.smoke_control.html_report import html_report
from cluster_cli.smoke.report import CheckResult, SmokeReport, Verdict

SIZES = [{"bytes": 4096 * 4**index, "busbw_gbps": 0.02 * 3**index, "algbw_gbps": 0.02, "correct": True, "time_us": 1.0}
         for index in range(5)]


def report(ddp_ms: float = 15.0, started: str = "2026-11-28T06:00:00+0000") -> SmokeReport:
    results = [
        CheckResult("srun", Verdict.PASS, "one task on each of 3 nodes", 0.17, "launch", "s", partition="debug"),
        CheckResult("qos-limit", Verdict.SKIP, "no QoS caps a user's GPUs <here>", partition="debug"),
        CheckResult("allreduce", Verdict.PASS, "busbw", 0.99, "busbw@64MiB", "GB/s", partition="debug", group="local",
                    details={"sizes": SIZES}),
        CheckResult("ddp", Verdict.FAIL, "scaling efficiency 0.46 < 0.8", 0.46, "scaling eff", "", 0.8, ">=",
                    partition="debug", group="local",
                    details={"step_time_ms": ddp_ms, "baseline_step_time_ms": 7.0}),
        CheckResult("fsdp", Verdict.PASS, "fsdp2", 45.7, "step", "ms", partition="debug", group="local",
                    details={"step_time_ms": 45.7}),
        CheckResult("all-nodes", Verdict.FAIL, "1 of 3 node(s) failed", 2, "nodes ok", "", partition="debug",
                    group="local", details={"nodes": {"node1": "ok", "node2": "ok", "node3": "no GPU <nvidia0>"}}),
    ]
    target = {"cluster": "local", "slurm_version": "22.05.8", "user": "smoke", "python": "/opt/venv/bin/python",
              "scopes": [{"partition": "debug", "group": "local", "nodes": ["node1", "node2", "node3"],
                          "gpus_per_node": 1, "gpu_type": "FAKE"}]}
    return SmokeReport(results, started, 117.3, target, "/srv/run")


class Page(HTMLParser):
    """The rows, bars and grid cells of a page, by their data attributes."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: list[dict[str, str | None]] = []
        self.bars: list[dict[str, str | None]] = []
        self.nodes: list[dict[str, str | None]] = []
        self.external: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "tr" and "data-check" in found:
            self.rows.append(found)
        elif tag == "rect":
            self.bars.append(found)
        elif tag == "td" and "data-node" in found:
            self.nodes.append(found)
        if tag in ("script", "link", "img", "iframe") or any(name in ("src", "href") for name in found):
            self.external.append(f"{tag} {found}")


def test_every_check_is_on_the_page_with_its_verdict_figure_and_charts() -> None:
    built = report()
    page = Page(html_report(built))
    assert [(row["data-check"], row["data-verdict"]) for row in page.rows] == [
        (result.name, result.verdict.value) for result in built.results]
    assert [row["data-figure"] for row in page.rows] == ["" if r.figure is None else repr(r.figure) for r in built.results]
    bandwidth = [bar for bar in page.bars if bar["data-label"].endswith(("KiB", "MiB", "GiB", " B"))]
    assert [float(bar["data-value"]) for bar in bandwidth] == [size["busbw_gbps"] for size in SIZES]
    assert [(bar["data-label"], float(bar["data-value"])) for bar in page.bars[len(SIZES):]] == [
        ("DDP step", 15.0), ("DDP, 1 rank", 7.0), ("FSDP step", 45.7)]
    assert [(node["data-node"], node["data-verdict"]) for node in page.nodes] == [
        ("node1", "pass"), ("node2", "pass"), ("node3", "fail")]
    assert page.external == []
    text = html_report(built)
    assert "&lt;here&gt;" in text and "<here>" not in text and "no GPU &lt;nvidia0&gt;" in text


def test_an_earlier_report_is_shown_beside_each_figure() -> None:
    text = html_report(report(ddp_ms=15.0), report(started="2026-11-27T06:00:00+0000"))
    assert "compared with</th><td>the report of 2026-11-27T06:00:00+0000" in text
    row = re.search(r'<tr data-check="fsdp".*?</tr>', text)
    assert row and "<td>step 45.7 ms</td><td>+0.0%</td>" in row.group(0)


def test_the_cli_writes_the_page_from_a_saved_report(tmp_path: Path) -> None:
    saved, earlier, page = tmp_path / "now.json", tmp_path / "then.json", tmp_path / "report.html"
    saved.write_text(json.dumps(report().to_dict()))
    earlier.write_text(json.dumps(report(started="2026-11-27T06:00:00+0000").to_dict()))
    done = CliRunner().invoke(main, ["smoke", "--from-json", str(saved), "--compare", str(earlier), "--html", str(page)])
    assert done.exit_code == 0, done.output
    assert Page(page.read_text()).rows and "2026-11-27T06:00:00+0000" in page.read_text()
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    refused = CliRunner().invoke(main, ["smoke", "--from-json", str(broken), "--html", str(page)])
    assert refused.exit_code != 0 and f"{broken}: not a smoke JSON report" in refused.output


CHROMIUM = shutil.which("chromium")
UNSHARE = shutil.which("unshare")


def page_requests(netlog: Path) -> list[str]:
    """The URLs the page asked for, from Chromium's network log: every URL request whose initiator
    is an origin (a file page's is "null"); the browser's own background requests have none."""
    text = netlog.read_text()
    log = json.loads(text if text.rstrip().endswith("}") else text.rstrip().rstrip(",") + "]}")
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [event["params"]["url"] for event in log["events"] if event["type"] == start
            and event.get("params", {}).get("initiator", "not an origin") != "not an origin"]


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
@pytest.mark.skipif(UNSHARE is None or os.geteuid() != 0,
                    reason="runs Chromium in a network namespace of its own (unshare --net), which needs root")
def test_a_real_browser_renders_the_page_and_fetches_nothing(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    built = report()
    page.write_text(html_report(built, report(started="2026-11-27T06:00:00+0000")))
    netlog, shot = tmp_path / "net.json", tmp_path / "report.png"
    # no network at all: the browser's own update and sign-in requests must not leave this machine either
    common = [UNSHARE, "--net", CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-sync", "--disable-background-networking", "--disable-component-update",
              f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*common, f"--log-net-log={netlog}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    rendered = Page(dom)
    assert [(row["data-check"], row["data-verdict"]) for row in rendered.rows] == [
        (result.name, result.verdict.value) for result in built.results]
    assert [row["data-figure"] for row in rendered.rows] == ["" if r.figure is None else repr(r.figure) for r in built.results]
    assert len(rendered.bars) == len(SIZES) + 3 and len(rendered.nodes) == 3
    assert page_requests(netlog) == []
    subprocess.run([*common, f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_the_request_log_reading_sees_a_page_that_fetches(tmp_path: Path) -> None:
    netlog = tmp_path / "net.json"
    netlog.write_text(json.dumps({"constants": {"logEventTypes": {"URL_REQUEST_START_JOB": 7}}, "events": [
        {"type": 7, "params": {"url": "https://update.example/", "initiator": "not an origin"}},
        {"type": 7, "params": {"url": "https://cdn.example/chart.js", "initiator": "null"}},
        {"type": 3, "params": {"url": "https://other.example/"}}]})[:-2] + ",")  # cut short, as a killed browser leaves it
    assert page_requests(netlog) == ["https://cdn.example/chart.js"]
