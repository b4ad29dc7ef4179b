"""Report writers: JSON against its schema, JUnit XML that parses, the plain-text table."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest

from cluster_cli.smoke import (
    REPORT_SCHEMA,
    CheckResult,
    SmokeReport,
    Verdict,
    format_table,
    junit_xml,
    write_json,
    write_junit,
)

jsonschema = pytest.importorskip("jsonschema")


def sample_report() -> SmokeReport:
    results = [
        CheckResult("srun", Verdict.PASS, "one task on each of 3 nodes", 0.12, "launch", "s", duration_s=0.2),
        CheckResult(
            "allreduce",
            Verdict.FAIL,
            "busbw 210 GB/s at 1GiB, below the required >= 350 GB/s",
            210.0,
            "busbw@1GiB",
            "GB/s",
            350.0,
            ">=",
            12.5,
            ["781"],
            "line 1\nNCCL WARN \x1b[31mtimeout\x07\n",
            {"sizes": [{"bytes": 4096}]},
        ),
        CheckResult("sacct", Verdict.SKIP, "accounting is off for this target", duration_s=0.0),
        CheckResult("ddp", Verdict.PASS, "efficiency", math.nan, "scaling eff", "", duration_s=20.0),
    ]
    return SmokeReport(
        results, "2026-11-22T11:00:00+00:00", 33.4, {"nodes": ["a", "b"], "gpus_per_node": 8}, "/w/run-1"
    )


def test_schema_is_itself_valid():
    jsonschema.Draft202012Validator.check_schema(REPORT_SCHEMA)


def test_json_report_matches_its_schema(tmp_path):
    path = tmp_path / "out" / "report.json"
    write_json(sample_report(), path)
    data = json.loads(path.read_text())
    jsonschema.validate(data, REPORT_SCHEMA)
    assert data["verdict"] == "fail"
    assert data["counts"] == {"pass": 2, "fail": 1, "skip": 1}
    assert [check["name"] for check in data["checks"]] == ["srun", "allreduce", "sacct", "ddp"]
    failed = data["checks"][1]
    assert failed["threshold"] == 350.0 and failed["comparison"] == ">=" and failed["job_ids"] == ["781"]
    assert "NCCL WARN" in failed["output_tail"]
    assert data["checks"][3]["figure"] is None  # NaN is not JSON: written as null


def test_schema_rejects_a_report_with_a_bad_verdict():
    data = sample_report().to_dict()
    data["checks"][0]["verdict"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, REPORT_SCHEMA)


def test_report_ok_ignores_skips():
    report = sample_report()
    report.results = [r for r in report.results if r.verdict is not Verdict.FAIL]
    assert report.ok and report.to_dict()["verdict"] == "pass"
    assert report.result("sacct").verdict is Verdict.SKIP
    with pytest.raises(KeyError):
        report.result("nope")


def test_junit_xml_parses_and_maps_verdicts(tmp_path):
    path = tmp_path / "junit.xml"
    write_junit(sample_report(), path)
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.attrib["tests"] == "4" and suite.attrib["failures"] == "1" and suite.attrib["skipped"] == "1"
    assert float(suite.attrib["time"]) == pytest.approx(33.4)
    cases = {case.attrib["name"]: case for case in suite.findall("testcase")}
    assert set(cases) == {"srun", "allreduce", "sacct", "ddp"}
    failure = cases["allreduce"].find("failure")
    assert failure is not None and "below the required" in failure.attrib["message"]
    assert "NCCL WARN" in (failure.text or "") and "\x1b" not in (failure.text or "")
    skipped = cases["sacct"].find("skipped")
    assert skipped is not None and skipped.attrib["message"] == "accounting is off for this target"
    assert cases["srun"].find("failure") is None and cases["srun"].find("skipped") is None
    assert float(cases["allreduce"].attrib["time"]) == pytest.approx(12.5)
    props = {p.attrib["name"]: p.attrib["value"] for p in suite.iter("property")}
    assert props["gpus_per_node"] == "8"


def test_junit_text_is_the_same_as_the_writer_output(tmp_path):
    report = sample_report()
    write_junit(report, tmp_path / "j.xml")
    assert (tmp_path / "j.xml").read_text() == junit_xml(report)


def test_table_lists_every_check_with_figure_threshold_and_time():
    lines = format_table(sample_report()).splitlines()
    assert lines[0].split() == ["check", "verdict", "figure", "threshold", "time"]
    row = next(line for line in lines if line.startswith("allreduce"))
    assert "FAIL" in row and "busbw@1GiB 210 GB/s" in row and ">= 350 GB/s" in row and "12.5s" in row
    assert next(line for line in lines if line.startswith("sacct ")).split()[1:] == ["SKIP", "-", "-", "0.0s"]
    assert "FAIL: 2 passed, 1 failed, 1 skipped in 33.4s" in lines
    assert "sacct [skip]: accounting is off for this target" in lines
    assert not any(line.startswith("srun [") for line in lines)  # passes need no explanation


def test_warnings_reach_the_table_the_json_and_the_junit(tmp_path):
    warned = CheckResult(
        "ddp",
        Verdict.PASS,
        "loss fell",
        warnings=["job 22 ended FAILED (exit 143:0) after its results were complete"],
        output_tail="terminate called without an active exception",
    )
    report = SmokeReport([warned], "2026-11-23T00:00:00Z", 1.0, {}, "/tmp/run")
    table = format_table(report)
    assert "PASS+WARN" in table and "(1 with warnings)" in table
    assert "ddp [warning]: job 22 ended FAILED (exit 143:0)" in table
    write_json(report, tmp_path / "report.json")
    data = json.loads((tmp_path / "report.json").read_text())
    jsonschema.validate(data, REPORT_SCHEMA)
    assert data["checks"][0]["warnings"] == warned.warnings and data["verdict"] == "pass"
    assert CheckResult.from_dict(data["checks"][0]).warnings == warned.warnings
    case = ET.fromstring(junit_xml(report).split("\n", 1)[1]).find(".//testcase")
    assert case is not None and case.find("failure") is None
    err = case.findtext("system-err") or ""
    assert "warning: job 22 ended FAILED" in err and "terminate called" in err
