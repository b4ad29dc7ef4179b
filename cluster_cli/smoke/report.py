"""Results of a smoke run and their writers: JSON (schema in ``REPORT_SCHEMA``), JUnit XML, a text table."""

from __future__ import annotations

import enum
import json
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_cli.smoke.userdir import write_file_at

REPORT_SCHEMA_VERSION = 3  # 2: each check carries ``warnings``; 3: and its ``partition`` and ``group``


class Verdict(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"

    def __str__(self) -> str:
        return self.value


@dataclass
class CheckResult:
    """One check's outcome.

    ``figure`` is the key measurement (``figure_name`` in ``unit``), ``threshold`` the bound it was
    judged against with ``comparison`` (``>=`` or ``<=``); both are None where the check has no
    numeric figure or no applicable bound. ``reason`` says why a check failed or was skipped (and
    what it saw when it passed); ``output_tail`` holds an excerpt of the job's output on failure
    or warning (head, torchrun's Root Cause block, tail: see slurm.excerpt). ``warnings`` are what
    a platform engineer should know without it changing the verdict, e.g. a job that ended badly
    after its results were complete (a crash in the ranks' teardown). ``partition`` and ``group``
    say where the check ran: a partition-wide check has no group; both are None for a run
    against one plain target.
    """

    name: str
    verdict: Verdict
    reason: str = ""
    figure: float | None = None
    figure_name: str = ""
    unit: str = ""
    threshold: float | None = None
    comparison: str | None = None
    duration_s: float = 0.0
    job_ids: list[str] = field(default_factory=list)
    output_tail: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    partition: str | None = None
    group: str | None = None

    @property
    def scope(self) -> tuple[str, str]:
        """(partition, group), "" for either that is not set: the report's grouping key."""
        return (self.partition or "", self.group or "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "figure": _finite(self.figure),
            "figure_name": self.figure_name,
            "unit": self.unit,
            "threshold": _finite(self.threshold),
            "comparison": self.comparison,
            "duration_s": round(self.duration_s, 3),
            "job_ids": list(self.job_ids),
            "output_tail": self.output_tail,
            "details": _jsonable(self.details),
            "warnings": list(self.warnings),
            "partition": self.partition,
            "group": self.group,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckResult:
        """The inverse of ``to_dict`` (a report read back from JSON, e.g. from a remote run)."""
        return cls(
            name=data["name"],
            verdict=Verdict(data["verdict"]),
            reason=data.get("reason", ""),
            figure=data.get("figure"),
            figure_name=data.get("figure_name", ""),
            unit=data.get("unit", ""),
            threshold=data.get("threshold"),
            comparison=data.get("comparison"),
            duration_s=data.get("duration_s", 0.0),
            job_ids=list(data.get("job_ids", [])),
            output_tail=data.get("output_tail"),
            details=dict(data.get("details", {})),
            warnings=list(data.get("warnings", [])),
            partition=data.get("partition"),
            group=data.get("group"),
        )


@dataclass
class SmokeReport:
    results: list[CheckResult]
    started_at: str
    duration_s: float
    target: dict[str, Any]
    run_dir: str

    @property
    def counts(self) -> dict[str, int]:
        return {verdict.value: sum(1 for r in self.results if r.verdict is verdict) for verdict in Verdict}

    @property
    def ok(self) -> bool:
        """True when no check failed (skips do not fail a run)."""
        return not any(result.verdict is Verdict.FAIL for result in self.results)

    def result(self, name: str, partition: str | None = None, group: str | None = None) -> CheckResult:
        """The first result of check ``name`` (in ``partition`` and ``group`` when given)."""
        for result in self.results:
            in_scope = partition in (None, result.partition) and group in (None, result.group)
            if result.name == name and in_scope:
                return result
        raise KeyError(name)

    def scopes(self) -> dict[tuple[str, str], list[CheckResult]]:
        """Results by (partition, group), in the order they ran."""
        grouped: dict[tuple[str, str], list[CheckResult]] = {}
        for result in self.results:
            grouped.setdefault(result.scope, []).append(result)
        return grouped

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "verdict": "pass" if self.ok else "fail",
            "started_at": self.started_at,
            "duration_s": round(self.duration_s, 3),
            "counts": self.counts,
            "run_dir": self.run_dir,
            "target": _jsonable(self.target),
            "checks": [result.to_dict() for result in self.results],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SmokeReport:
        return cls(
            results=[CheckResult.from_dict(check) for check in data["checks"]],
            started_at=data["started_at"],
            duration_s=data["duration_s"],
            target=dict(data["target"]),
            run_dir=data["run_dir"],
        )


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _jsonable(value: Any) -> Any:
    """Round-trip through json with str() for anything unusual (paths, enums)."""
    return json.loads(json.dumps(value, default=str))


_NUMBER_OR_NULL = {"type": ["number", "null"]}

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "cluster-cli smoke report",
    "type": "object",
    "required": [
        "schema_version",
        "verdict",
        "started_at",
        "duration_s",
        "counts",
        "run_dir",
        "target",
        "checks",
    ],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"const": REPORT_SCHEMA_VERSION},
        "verdict": {"enum": ["pass", "fail"]},
        "started_at": {"type": "string", "description": "ISO 8601 UTC"},
        "duration_s": {"type": "number", "minimum": 0},
        "counts": {
            "type": "object",
            "required": ["pass", "fail", "skip"],
            "additionalProperties": False,
            "properties": {key: {"type": "integer", "minimum": 0} for key in ("pass", "fail", "skip")},
        },
        "run_dir": {"type": "string"},
        "target": {"type": "object"},
        "checks": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "name",
                    "verdict",
                    "reason",
                    "figure",
                    "figure_name",
                    "unit",
                    "threshold",
                    "comparison",
                    "duration_s",
                    "job_ids",
                    "output_tail",
                    "details",
                    "warnings",
                    "partition",
                    "group",
                ],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "verdict": {"enum": ["pass", "fail", "skip"]},
                    "reason": {"type": "string"},
                    "figure": _NUMBER_OR_NULL,
                    "figure_name": {"type": "string"},
                    "unit": {"type": "string"},
                    "threshold": _NUMBER_OR_NULL,
                    "comparison": {"enum": [">=", "<=", None]},
                    "duration_s": {"type": "number", "minimum": 0},
                    "job_ids": {"type": "array", "items": {"type": "string"}},
                    "output_tail": {"type": ["string", "null"]},
                    "details": {"type": "object"},
                    "warnings": {"type": "array", "items": {"type": "string"}},
                    "partition": {"type": ["string", "null"]},
                    "group": {"type": ["string", "null"]},
                },
            },
        },
    },
}


def _atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` at once; the temporary file is new (never a link someone planted)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_file_at(directory, path.name, text.encode())
    finally:
        os.close(directory)


def json_text(report: SmokeReport) -> str:
    return json.dumps(report.to_dict(), indent=2) + "\n"


def write_json(report: SmokeReport, path: str | Path) -> None:
    _atomic_write(Path(path), json_text(report))


def junit_xml(report: SmokeReport, suite_name: str = "cluster-smoke") -> str:
    """JUnit XML: one <testsuite> per partition and node group (``cluster-smoke.gpu.h100``), one
    <testcase> per check in it; fail -> <failure>, skip -> <skipped>."""
    suites = ET.Element("testsuites", name=suite_name)
    scopes = report.scopes()
    for (partition, group), results in scopes.items():
        name = ".".join(part for part in (suite_name, partition, group) if part)
        # One scope: the run's wall time; several: each suite's own checks.
        seconds = report.duration_s if len(scopes) == 1 else sum(result.duration_s for result in results)
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=name,
            tests=str(len(results)),
            failures=str(sum(1 for result in results if result.verdict is Verdict.FAIL)),
            errors="0",
            skipped=str(sum(1 for result in results if result.verdict is Verdict.SKIP)),
            time=f"{seconds:.3f}",
            timestamp=report.started_at,
        )
        properties = ET.SubElement(suite, "properties")
        for key, value in sorted(_scope_properties(report.target, partition, group).items()):
            ET.SubElement(properties, "property", name=key, value=str(value))
        for result in results:
            _junit_case(suite, f"{name}.checks", result)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _scope_properties(target: dict[str, Any], partition: str, group: str) -> dict[str, Any]:
    """The run's target as JUnit properties; for a run over several scopes, what they share
    and this scope's own entry (its nodes, GPUs and thresholds)."""
    shared = {key: value for key, value in target.items() if key != "scopes"}
    for scope in target.get("scopes", []):
        if (scope.get("partition") or "", scope.get("group") or "") == (partition, group):
            return {**shared, **scope}
    return shared


def _junit_case(suite: ET.Element, classname: str, result: CheckResult) -> None:
    case = ET.SubElement(
        suite, "testcase", classname=classname, name=result.name, time=f"{result.duration_s:.3f}"
    )
    if result.verdict is Verdict.FAIL:
        failure = ET.SubElement(case, "failure", message=_xml_safe(result.reason), type="SmokeCheckFailure")
        failure.text = _xml_safe(result.output_tail or result.reason)
    elif result.verdict is Verdict.SKIP:
        ET.SubElement(case, "skipped", message=_xml_safe(result.reason))
    out = ET.SubElement(case, "system-out")
    out.text = _xml_safe(f"{format_figure(result)}  threshold: {format_threshold(result)}\n{result.reason}")
    if result.warnings:
        err = ET.SubElement(case, "system-err")
        err.text = _xml_safe(
            "\n".join(f"warning: {warning}" for warning in result.warnings)
            + (f"\n{result.output_tail}" if result.output_tail else "")
        )


def _xml_safe(text: str) -> str:
    """Drop characters XML 1.0 cannot carry (job output may contain terminal control codes)."""
    return "".join(
        char
        for char in text
        if char in "\t\n\r"
        or 0x20 <= ord(char) <= 0xD7FF
        or 0xE000 <= ord(char) <= 0xFFFD
        or 0x10000 <= ord(char) <= 0x10FFFF
    )


def write_junit(report: SmokeReport, path: str | Path) -> None:
    _atomic_write(Path(path), junit_xml(report))


def format_figure(result: CheckResult) -> str:
    if result.figure is None:
        return "-"
    name = f"{result.figure_name} " if result.figure_name else ""
    return f"{name}{result.figure:.4g}{(' ' + result.unit) if result.unit else ''}"


def format_threshold(result: CheckResult) -> str:
    if result.threshold is None:
        return "-"
    return f"{result.comparison or '>='} {result.threshold:g}{(' ' + result.unit) if result.unit else ''}"


def format_table(report: SmokeReport, reasons: bool = True) -> str:
    """Plain-text table: check, verdict, figure, threshold, time; then why each fail/skip happened.

    A run over several partitions and node groups gets one section per (partition, group), headed
    ``== partition gpu, group h100 ==``; the lines under the table name the scope of each reason.
    """
    header = ("check", "verdict", "figure", "threshold", "time")
    scopes = report.scopes()
    sectioned = len(scopes) > 1 or any(scope != ("", "") for scope in scopes)
    rows = {id(r): (r.name, _verdict_cell(r), format_figure(r), format_threshold(r), f"{r.duration_s:.1f}s")
            for r in report.results}
    widths = [max(len(row[i]) for row in [header, *rows.values()]) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()

    lines = [line(header), "  ".join("-" * width for width in widths)]
    for scope, results in scopes.items():
        if sectioned:
            lines.append(f"== {scope_title(*scope)} ==")
        lines.extend(line(rows[id(result)]) for result in results)
    counts = report.counts
    warned = sum(1 for result in report.results if result.warnings)
    lines.append(
        f"{'PASS' if report.ok else 'FAIL'}: {counts['pass']} passed, {counts['fail']} failed, "
        f"{counts['skip']} skipped in {report.duration_s:.1f}s"
        + (f" ({warned} with warnings)" if warned else "")
    )
    if reasons:
        for result in report.results:
            where = f" ({'/'.join(part for part in result.scope if part)})" if sectioned else ""
            if result.verdict is not Verdict.PASS and result.reason:
                lines.append(f"{result.name}{where} [{result.verdict.value}]: {result.reason}")
            lines.extend(f"{result.name}{where} [warning]: {warning}" for warning in result.warnings)
    return "\n".join(lines)


def scope_title(partition: str, group: str) -> str:
    """``partition gpu, group h100``; ``partition gpu`` for the partition-wide checks."""
    parts = [f"partition {partition}" if partition else "", f"group {group}" if group else ""]
    return ", ".join(part for part in parts if part) or "default partition"


def _verdict_cell(result: CheckResult) -> str:
    return result.verdict.value.upper() + ("+WARN" if result.warnings else "")
