"""benchmarks/sched_throughput.py's pure parts: what it reads from sbatch, squeue and sacct, the
sbatch options it submits with, the rates and the section it writes (only its own)."""

from __future__ import annotations

import pytest
from unit_helpers import benchmark_module

from devtools.markdown import replace_section


@pytest.fixture(scope="module")
def bench():
    with benchmark_module("sched_throughput") as module:
        yield module


def test_job_ids_remaining_jobs_and_end_states_are_read_from_the_commands(bench):
    assert bench.job_id("4242\n") == "4242"
    assert bench.job_id("4242;hetero\n") == "4242"
    assert bench.remaining("") == 0
    assert bench.remaining("17_3\n17_2\n18\n\n") == 3  # -r: one line per array task
    sacct = "17_0|COMPLETED\n17_1|COMPLETED\n18|CANCELLED by 0\n19|FAILED\n"
    assert bench.end_states(sacct) == {"CANCELLED": 1, "COMPLETED": 2, "FAILED": 1}


def test_the_jobs_ask_for_one_task_one_minute_and_the_memory_asked(bench):
    options = bench.sbatch_options("sched-bench-1", "1M", None)
    assert options[-1] == "--wrap=true"
    assert {"--parsable", "--job-name=sched-bench-1", "-n1", "--mem=1M", "-o"} <= set(options)
    assert options[options.index("-t") + 1] == "1"
    no_mem = bench.sbatch_options("n", None, "cpu")
    assert not any(option.startswith("--mem") for option in no_mem) and "--partition=cpu" in no_mem


def test_rates_and_the_goal_verdict(bench):
    fast = bench.Result(1000, 12.5, 40.0, 3.0, 8.0, {"COMPLETED": 1000})
    assert fast.submit_rate == 80.0 and fast.done_rate == 25.0
    text = bench.section(fast, "inventories/examples/hetero-local.yaml", "1M", "Before X.", "a machine")
    assert "| 12.5 s | 80 jobs/s |" in text and "| 40.0 s | 25.0 jobs/s | <= 60 s: meets |" in text
    assert "1000 COMPLETED" in text and "slurmctld 8.0 s" in text
    slow = bench.Result(1000, 10.0, 61.0, 3.0, None, {})
    text = bench.section(slow, "inv.yaml", None, "", "m")
    assert "<= 60 s: misses" in text and "slurmctld not read" in text and "--no-mem" in text


def test_each_mode_has_its_own_subsection_and_nothing_else_changes(bench):
    document = "# Benchmarks\n\n## Render\n\nfigures\n"
    one = bench.section(bench.Result(1000, 10.0, 30.0, 1.0, 1.0, {}), "inv.yaml", "1M", "", "m")
    two = bench.section(bench.Result(1000, 10.0, 90.0, 1.0, 1.0, {}), "inv.yaml", None, "", "m")
    written = replace_section(replace_section(document, one, parent=bench.SECTION), two, parent=bench.SECTION)
    assert written.startswith(document)
    assert written.count(bench.SECTION) == 1
    assert "### inv.yaml, --mem 1M" in written and "### inv.yaml, --no-mem" in written
    again = replace_section(written, one, parent=bench.SECTION)
    assert again == written
