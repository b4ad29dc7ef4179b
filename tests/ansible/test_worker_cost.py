"""benchmarks/worker_cost.py with a real ansible-playbook: its sitecustomize records one line per
worker (task, host, the worker's own CPU and page faults) and the main process's CPU, and the
summary counts them per task for the hosts asked for."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from role_runner import REPO, ansible_playbook, run_play

# Loaded from its file (it imports only the standard library): benchmarks/ stays off sys.path. Its
# dataclasses look their module up in sys.modules while it loads.
_spec = importlib.util.spec_from_file_location("worker_cost", REPO / "benchmarks" / "worker_cost.py")
worker_cost = sys.modules["worker_cost"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker_cost)

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

PLAY = {"tasks": [
    {"name": "First task", "ansible.builtin.command": {"argv": ["true"]}, "changed_when": False},
    {"name": "Second task", "ansible.builtin.debug": {"msg": "{{ inventory_hostname | upper }}"}},
]}


def test_each_worker_and_the_main_process_are_recorded(tmp_path: Path) -> None:
    log = tmp_path / "workers.jsonl"
    env = worker_cost.measured_environment(log)
    run = run_play(tmp_path / "play", PLAY, {"one": {}, "two": {}}, {},
                   env={"WORKER_COST_LOG": env["WORKER_COST_LOG"], "PYTHONPATH": env["PYTHONPATH"]})
    assert run.returncode == 0, run.explain()
    records = worker_cost.read_records(log)
    workers = [record for record in records if record["kind"] == "worker"]
    assert sorted((record["task"], record["host"]) for record in workers) == [
        ("First task", "one"), ("First task", "two"), ("Second task", "one"), ("Second task", "two")]
    assert all(record["cpu_s"] > 0 and record["minor_faults"] > 0 for record in workers)
    assert [record["kind"] for record in records].count("main") == 1

    cost = worker_cost.summarize(records, hosts="one")
    assert cost.hosts == 1 and cost.workers == 2
    assert {task.task for task in cost.tasks} == {"First task", "Second task"}
    assert cost.main_cpu_s is not None and cost.main_cpu_s > 0
    assert "2 workers on 1 hosts" in worker_cost.report(cost)


def test_without_the_log_variable_nothing_is_recorded(tmp_path: Path) -> None:
    env = worker_cost.measured_environment(tmp_path / "workers.jsonl")
    run = run_play(tmp_path / "play", PLAY, {"one": {}}, {}, env={"PYTHONPATH": env["PYTHONPATH"], "WORKER_COST_LOG": ""})
    assert run.returncode == 0, run.explain()
    assert not (tmp_path / "workers.jsonl").exists()
