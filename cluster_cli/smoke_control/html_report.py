"""The smoke report as one self-contained HTML page (`cluster-cli smoke --html FILE`): the cluster's
shape and versions, the verdicts by partition and node group with each figure against its
threshold (and against an earlier report's when one is given), and charts drawn as inline SVG:
all-reduce bus bandwidth by message size, the DDP/FSDP step times, the per-node results of
`--all-nodes` as a grid. Nothing is fetched: no script, font, style sheet or image from anywhere.
"""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Any

from cluster_cli.errors import ClusterCliError
from cluster_cli.smoke.report import CheckResult, SmokeReport, format_figure, format_threshold, scope_title

COLOURS = {"pass": "#1a7f37", "fail": "#cf222e", "skip": "#9a6700"}
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1f2328; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
.verdict { font-weight: bold; color: white; border-radius: 3px; padding: 1px 6px; }
.reason { color: #57606a; max-width: 60em; }
figure { display: inline-block; margin: 0 2em 1.5em 0; }
figcaption { font-weight: bold; }
"""


def html_report(report: SmokeReport, earlier: SmokeReport | None = None) -> str:
    verdict = "pass" if report.ok else "fail"
    counts = report.counts
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        # no request leaves the page: nothing but inline styles and images
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "img-src data:\">",
        f"<title>smoke report: {escape(str(report.target.get('cluster', '')))} {verdict}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Smoke report: cluster {escape(str(report.target.get('cluster', '?')))} "
        f"{_badge(verdict, verdict.upper())}</h1>",
        f"<p id=\"summary\">{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped in "
        f"{report.duration_s:.1f} s; started {escape(report.started_at)}</p>",
        _shape(report.target, earlier),
    ]
    for (partition, group), results in report.scopes().items():
        parts.append(f"<h2>{escape(scope_title(partition, group))}</h2>")
        parts.append(_table(results, earlier))
        parts.append(_charts(results))
    parts.append("</body></html>")
    return "\n".join(parts)


def _badge(verdict: str, text: str) -> str:
    return f'<span class="verdict" style="background:{COLOURS.get(verdict, "#57606a")}">{escape(text)}</span>'


def _shape(target: dict[str, Any], earlier: SmokeReport | None) -> str:
    rows = [("Slurm", str(target.get("slurm_version") or "?")), ("test user", str(target.get("user", "?"))),
            ("Python", str(target.get("python", "?")))]
    for scope in target.get("scopes", []):
        where = scope_title(scope.get("partition") or "", scope.get("group") or "")
        gpus = f"{scope.get('gpus_per_node', 0)} x {scope.get('gpu_type') or 'GPU'} per node" if scope.get(
            "gpus_per_node") else "no GPUs"
        rows.append((where, f"{len(scope.get('nodes', []))} nodes ({', '.join(scope.get('nodes', [])[:8])}"
                            f"{' ...' if len(scope.get('nodes', [])) > 8 else ''}); {gpus}"))
    if earlier is not None:
        rows.append(("compared with", f"the report of {earlier.started_at}"))
    body = "".join(f"<tr><th>{escape(name)}</th><td>{escape(value)}</td></tr>" for name, value in rows)
    return f'<table id="shape">{body}</table>'


def _table(results: list[CheckResult], earlier: SmokeReport | None) -> str:
    header = ["check", "verdict", "figure", "threshold", *(["earlier", "change"] if earlier else []), "time", "reason"]
    rows = ["<tr>" + "".join(f"<th>{name}</th>" for name in header) + "</tr>"]
    for result in results:
        before = _earlier(earlier, result)
        cells = [escape(result.name), _badge(result.verdict.value, result.verdict.value.upper()),
                 escape(format_figure(result)), escape(format_threshold(result))]
        if earlier is not None:
            cells += [escape(format_figure(before)) if before else "-", escape(_change(result, before))]
        reason = escape(result.reason or "") + "".join(f"<br>warning: {escape(text)}" for text in result.warnings)
        cells += [f"{result.duration_s:.1f} s", f'<span class="reason">{reason}</span>']
        rows.append(f'<tr data-check="{escape(result.name)}" data-verdict="{result.verdict.value}" '
                    f'data-figure="{"" if result.figure is None else repr(result.figure)}">'
                    + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return "<table class=\"checks\">" + "".join(rows) + "</table>"


def _earlier(earlier: SmokeReport | None, result: CheckResult) -> CheckResult | None:
    if earlier is None:
        return None
    try:
        return earlier.result(result.name, result.partition, result.group)
    except KeyError:
        return None


def _change(result: CheckResult, before: CheckResult | None) -> str:
    if before is None or result.figure is None or before.figure is None or before.figure == 0:
        return "-"
    return f"{(result.figure - before.figure) / abs(before.figure):+.1%}"


def _charts(results: list[CheckResult]) -> str:
    by_name = {result.name: result for result in results}

    def details(name: str) -> dict[str, Any]:
        return by_name[name].details if name in by_name else {}

    charts = []
    sizes = details("allreduce").get("sizes") or []
    if sizes:
        charts.append(_bars("all-reduce bus bandwidth by message size (GB/s)",
                            [(_bytes(size["bytes"]), float(size["busbw_gbps"])) for size in sizes]))
    steps = [(label, float(value)) for label, value in (
        ("DDP step", details("ddp").get("step_time_ms")),
        ("DDP, 1 rank", details("ddp").get("baseline_step_time_ms")),
        ("FSDP step", details("fsdp").get("step_time_ms"))) if value is not None]
    if steps:
        charts.append(_bars("training step times (ms)", steps))
    nodes = details("all-nodes").get("nodes")
    if isinstance(nodes, dict) and nodes:
        charts.append(_grid(nodes))
    return "".join(charts)


def _bytes(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count} B"


def _bars(title: str, values: list[tuple[str, float]]) -> str:
    """A bar chart in inline SVG: one bar per (label, value), each with its value written on it."""
    width, bar, gap, height = 60, 40, 20, 200
    top = max((value for _, value in values if math.isfinite(value)), default=0) or 1
    shapes = []
    for index, (label, value) in enumerate(values):
        x = gap + index * width
        tall = max(1.0, height * value / top) if math.isfinite(value) else 1.0
        shapes.append(f'<rect class="bar" x="{x}" y="{height - tall + 20:.1f}" width="{bar}" height="{tall:.1f}" '
                      f'fill="#0969da" data-label="{escape(label)}" data-value="{value!r}"/>'
                      f'<text x="{x + bar / 2}" y="{height - tall + 15:.1f}" font-size="10" text-anchor="middle">'
                      f'{value:.3g}</text><text x="{x + bar / 2}" y="{height + 35}" font-size="10" '
                      f'text-anchor="middle">{escape(label)}</text>')
    svg_width = gap + len(values) * width
    return (f'<figure class="chart"><figcaption>{escape(title)}</figcaption><svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{svg_width}" height="{height + 45}" role="img" aria-label="{escape(title)}">{"".join(shapes)}'
            "</svg></figure>")


def _grid(nodes: dict[str, str]) -> str:
    """--all-nodes: one cell per node, green where it answered "ok", red with the reason otherwise."""
    cells = []
    for name, said in sorted(nodes.items()):
        verdict = "pass" if said == "ok" else "fail"
        cells.append(f'<td class="node" data-node="{escape(name)}" data-verdict="{verdict}" title="{escape(said)}" '
                     f'style="background:{COLOURS[verdict]};color:white">{escape(name)}</td>')
    rows = ["<tr>" + "".join(cells[index:index + 16]) + "</tr>" for index in range(0, len(cells), 16)]
    return '<figure class="chart"><figcaption>every node (--all-nodes)</figcaption><table class="grid">' \
           + "".join(rows) + "</table></figure>"


def read_report(path: Path) -> SmokeReport:
    """A saved JSON report (`smoke --json`); a file that is not one is an error naming it."""
    try:
        return SmokeReport.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ClusterCliError(f"{path}: not a smoke JSON report ({error.__class__.__name__}: {error})") from None


def write_html(report: SmokeReport, path: Path, earlier_path: Path | None = None) -> None:
    earlier = read_report(earlier_path) if earlier_path is not None else None
    path.write_text(html_report(report, earlier), encoding="utf-8")
