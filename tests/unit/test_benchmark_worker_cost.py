"""benchmarks/worker_cost.py's summary: per task for the hosts asked for, dearest first."""

from __future__ import annotations

import pytest
from unit_helpers import benchmark_module


@pytest.fixture(scope="module")
def worker_cost():
    with benchmark_module("worker_cost") as module:
        yield module


def _worker(task: str, host: str, cpu_s: float, faults: int = 100) -> dict[str, object]:
    return {"kind": "worker", "task": task, "host": host, "cpu_s": cpu_s, "minor_faults": faults}


def test_tasks_of_the_matching_hosts_dearest_first(worker_cost):
    records = [_worker("cheap", "c1", 0.01), _worker("dear", "c1", 0.05), _worker("dear", "c2", 0.03),
               _worker("dear", "ctl", 0.50), {"kind": "main", "cpu_s": 2.5}]
    cost = worker_cost.summarize(records, hosts=r"c[0-9]+")
    assert [(task.task, task.workers) for task in cost.tasks] == [("dear", 2), ("cheap", 1)]
    assert cost.hosts == 2 and cost.workers == 3
    assert cost.cpu_s == pytest.approx(0.09)
    assert cost.tasks[0].mean_ms == pytest.approx(40.0)
    assert cost.main_cpu_s == 2.5


def test_the_report_gives_the_totals_per_host_and_worker(worker_cost):
    cost = worker_cost.summarize([_worker("a", "c1", 0.02), _worker("b", "c2", 0.04)])
    text = worker_cost.report(cost)
    assert "| a | 1 | 0.02 | 20 | 100 |" in text
    assert "2 workers on 2 hosts: 0.06 CPU-s, 0.03 per host, 30 ms per worker." in text
    assert "Main ansible-playbook process" not in text  # it recorded nothing


def test_the_site_directory_goes_first_on_the_python_path(worker_cost, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = worker_cost.measured_environment(tmp_path / "log")
    assert env["PYTHONPATH"].split(":") == [str(worker_cost.SITE), "/elsewhere"]
    assert env["WORKER_COST_LOG"] == str(tmp_path / "log")
