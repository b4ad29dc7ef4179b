"""The proof's results: ``proof.json`` and ``summary.md``, rewritten after every step."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PASS, FAIL, SKIP, ADAPTED, STOP = "pass", "fail", "skip", "adapted", "stop"


@dataclass
class Step:
    name: str
    verdict: str
    says: str
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Record:
    """What the run found so far; ``write`` after each step."""

    out: Path
    started: float = field(default_factory=time.monotonic)
    machine: dict[str, Any] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)

    def add(self, step: Step) -> Step:
        self.steps.append(step)
        self.write()
        print(f"[{step.verdict:>7}] {step.name}: {step.says} ({step.seconds:.1f} s)", flush=True)
        return step

    @property
    def ok(self) -> bool:
        return all(step.verdict in (PASS, SKIP, ADAPTED) for step in self.steps)

    def write(self) -> None:
        elapsed = round(time.monotonic() - self.started, 1)
        data = {"machine": self.machine, "elapsed_s": elapsed, "ok": self.ok,
                "steps": [asdict(step) for step in self.steps], "figures": self.figures}
        _atomic(self.out / "proof.json", json.dumps(data, indent=2, default=str) + "\n")
        _atomic(self.out / "summary.md", summary_markdown(self, elapsed))


def _atomic(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    temp.replace(path)


def summary_markdown(record: Record, elapsed: float) -> str:
    machine = record.machine
    lines = [
        "# GPU proof",
        "",
        f"- machine: {machine.get('description', '?')}",
        f"- kit: {machine.get('kit', '?')}",
        f"- run so far: {elapsed:.0f} s; verdict: {'PASS' if record.ok else 'FAIL'} "
        f"({len(record.steps)} steps written)",
        "",
        "| step | verdict | what it found | s |",
        "|---|---|---|---|",
        *(f"| {s.name} | {s.verdict} | {_cell(s.says)} | {s.seconds:.1f} |" for s in record.steps),
    ]
    if record.figures:
        lines += ["", "| figure | value | threshold | verdict | reason |", "|---|---|---|---|---|"]
        lines += [f"| {f['check']} {f['what']} | {f['value']} | {f['threshold']} | {f['verdict']} | "
                  f"{_cell(f['reason'])} |" for f in record.figures]
    lines += ["", "Row for docs/gpu-validation.md:", "", results_row(record, elapsed), ""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _figure(record: Record, check: str) -> str:
    found = [f for f in record.figures if f["check"] == check]
    if not found:
        return "not run"
    f = found[0]
    if f["value"] is None:
        return f"skipped: {f['reason']}"
    return f"{f['value']} ({f['verdict']}, >= {f['threshold']})" if f["threshold"] is not None else f"{f['value']}"


def results_row(record: Record, elapsed: float) -> str:
    machine = record.machine
    autodetect = next((s for s in record.steps if s.name == "autodetect"), None)
    found = autodetect.details.get("found_by_nvml", "?") if autodetect else "not run"
    listed = machine.get("gpu_count", "?")
    cells = [
        time.strftime("%Y-%m-%d"),
        machine.get("description", "?"),
        f"{machine.get('kit_bytes', '?')} B kit, {elapsed:.0f} s",
        f"{found} / {listed}",
        _figure(record, "gpu matmul"),
        _figure(record, "gpu copy"),
        _figure(record, "allreduce"),
        _figure(record, "ddp"),
        "PASS" if record.ok else "FAIL: " + ", ".join(s.name for s in record.steps if s.verdict in (FAIL, STOP)),
    ]
    return "| " + " | ".join(_cell(cell) for cell in cells) + " |"
