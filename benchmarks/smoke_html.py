"""Benchmark: the smoke HTML page of a 58-check run, its size and Chromium's time to render it.

    .venv/bin/python benchmarks/smoke_html.py [REPORT.json] [--checks 58] [--write]

Builds a report of CHECKS results from a saved JSON report (default: the local cluster's
`smoke-report.json` of `make cluster`), its checks repeated over more node groups as the hetero
cluster's run has them (three partitions, five groups), writes the page with an earlier report
to compare, and times Debian's headless Chromium dumping its DOM (median of 5), beside the same
for an empty page (the browser's own start), with no network (unshare --net: root). --write replaces
the subsection in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from deploy_local import machine

from cluster_cli.smoke.report import CheckResult, SmokeReport
from cluster_cli.smoke_control.html_report import html_report, read_report
from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
SECTION = "## Smoke HTML report"
SIZE_GOAL, RENDER_GOAL_S = 1 << 20, 2.0
GROUPS = [("gpu", "h100"), ("gpu", "a100"), ("mixed", "l40s"), ("mixed", "cpu"), ("all", "local")]


def widened(report: SmokeReport, checks: int) -> SmokeReport:
    """``report``'s results repeated over GROUPS until there are ``checks`` of them."""
    results: list[CheckResult] = []
    while len(results) < checks:
        partition, group = GROUPS[len(results) // len(report.results) % len(GROUPS)]
        for result in report.results[: checks - len(results)]:
            copy = CheckResult.from_dict(result.to_dict())
            copy.partition, copy.group = partition, (group if result.group else None)
            results.append(copy)
    return SmokeReport(results, report.started_at, report.duration_s, report.target, report.run_dir)


def render_s(chromium: str, page: Path, work: Path) -> float:
    times = []
    for run in range(5):
        started = time.perf_counter()
        # in a network namespace of its own: the browser's background requests must not leave this machine
        subprocess.run(["unshare", "--net", chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-sync", "--disable-background-networking", "--disable-component-update",
                        f"--user-data-dir={work / f'profile{run}'}", "--dump-dom", page.as_uri()],
                       capture_output=True, timeout=120, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", nargs="?", type=Path, default=REPO / "smoke-report.json")
    parser.add_argument("--checks", type=int, default=58)
    parser.add_argument("--write", action="store_true")
    options = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("needs Debian's chromium (apt-get install chromium)")
    report = widened(read_report(options.report), options.checks)
    with tempfile.TemporaryDirectory() as name:
        work = Path(name)
        page, empty = work / "report.html", work / "empty.html"
        page.write_text(html_report(report, report))
        empty.write_text("<!DOCTYPE html><title>empty</title>")
        size, page_s, empty_s = page.stat().st_size, render_s(chromium, page, work), render_s(chromium, empty, work)
    met = size <= SIZE_GOAL and page_s <= RENDER_GOAL_S
    text = "\n".join([
        SECTION, "",
        f"`.venv/bin/python benchmarks/smoke_html.py --write`: the page of {len(report.results)} checks (the local "
        f"cluster's report widened to five node groups), compared with itself. Machine: {machine()}.", "",
        "| what | figure | goal |", "|---|---|---|",
        f"| page size | {size:,} bytes | <= 1 MiB |",
        f"| Chromium headless, `--dump-dom` of the page (median of 5, the browser's start included) | {page_s:.2f} s | <= 2 s |",
        f"| the same for an empty page (the browser's start alone) | {empty_s:.2f} s | |", "",
        f"Goals {'met' if met else 'NOT met'}.", "",
    ])
    print(text)
    if options.write:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text))


if __name__ == "__main__":
    main()
