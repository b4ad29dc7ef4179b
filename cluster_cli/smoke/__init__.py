"""Smoke suite: prove a Slurm GPU cluster schedules, binds GPUs and trains.

Library API (no CLI code here)::

    from cluster_cli.smoke import SmokeTarget, run_smoke, write_json, write_junit, format_table

    target = SmokeTarget(nodes=["node1", "node2"], work_dir=Path("/shared/smoke"), gpus_per_node=8,
                         gpu_type="H100", python="/opt/train-venv/bin/python")
    report = run_smoke(target, only=None, progress=print)
    print(format_table(report))
    write_json(report, "smoke.json"); write_junit(report, "smoke.xml")

See docs/smoke.md for the checks, thresholds and the JSON schema.

This package is the host side of the suite: ``cluster-cli smoke`` copies it to the submit host
and runs ``python3 -m cluster_cli.smoke.on_submit_host`` there, with that host's Python. So it imports the
standard library and itself only, never pydantic, click or the rest of cluster_cli (the control
node's side is ``cluster_cli.smoke_control``).
"""

from cluster_cli.smoke.registry import CHECK_NAMES, CHECKS
from cluster_cli.smoke.report import (
    REPORT_SCHEMA,
    CheckResult,
    SmokeReport,
    Verdict,
    format_table,
    junit_xml,
    write_json,
    write_junit,
)
from cluster_cli.smoke.suite import ProgressCallback, SmokeEvent, run_smoke
from cluster_cli.smoke.suite_errors import SmokeSetupError, UnknownCheckError
from cluster_cli.smoke.target import SmokeTarget

__all__ = [
    "CHECKS",
    "CHECK_NAMES",
    "REPORT_SCHEMA",
    "CheckResult",
    "ProgressCallback",
    "SmokeEvent",
    "SmokeReport",
    "SmokeSetupError",
    "SmokeTarget",
    "UnknownCheckError",
    "Verdict",
    "format_table",
    "junit_xml",
    "run_smoke",
    "write_json",
    "write_junit",
]
