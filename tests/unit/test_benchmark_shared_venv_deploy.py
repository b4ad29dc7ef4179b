"""benchmarks/shared_venv_deploy.py (issue 34's figure): the first deploy of an event log that holds
several, and each host's seconds in the training environment's plays against the rest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from unit_helpers import REPO


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import shared_venv_deploy

    yield shared_venv_deploy
    sys.path.remove(str(REPO / "benchmarks"))


def _deploy(start: float, install: float) -> list[dict]:
    """A deploy in which c1 installs the environment (``install`` s) and c2 checks it (1 s)."""
    return [
        {"event": "play", "name": "Preflight on the control node", "t": start},
        {"event": "play", "name": "Compute nodes", "t": start},
        *[event for host in ("c1", "c2") for event in (
            {"event": "start", "host": host, "task": "slurmd : Install slurmd", "t": start},
            {"event": "ok", "host": host, "task": "Install slurmd", "t": start + 10})],
        {"event": "play", "name": "Training environment", "t": start + 10},
        {"event": "start", "host": "c1", "task": "training_env : Install", "t": start + 10},
        {"event": "ok", "host": "c1", "task": "Install", "t": start + 10 + install},
        {"event": "start", "host": "c2", "task": "training_env : Install", "t": start + 10},
        {"event": "skipped", "host": "c2", "task": "Install", "t": start + 10},
        {"event": "play", "name": "Shared training environment", "t": start + 10 + install},
        *[event for host in ("c1", "c2") for event in (
            {"event": "start", "host": host, "task": "training_env : Check", "t": start + 10 + install},
            {"event": "ok", "host": host, "task": "Check", "t": start + 11 + install})],
        {"event": "play", "name": "Node exporter", "t": start + 11 + install},
    ]


def test_only_the_first_deploy_counts_and_each_host_is_timed_apart(bench, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps(event) + "\n" for event in _deploy(0.0, 30.0) + _deploy(100.0, 5.0)))
    events = bench.first_deploy(bench.read_events(log))
    assert bench.host_seconds(events, "c1") == pytest.approx((31.0, 10.0))
    assert bench.host_seconds(events, "c2") == pytest.approx((1.0, 10.0))
    assert bench.play_walls(events) == pytest.approx({"Training environment": 30.0, "Shared training environment": 1.0})
    text = bench.table({"shared": log}, ("c1", "c2"))
    assert "| shared | c1 | 31.0 | 10.0 | 4.100 |" in text and "| shared | c2 | 1.0 | 10.0 | 1.100 |" in text
