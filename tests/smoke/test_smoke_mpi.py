"""The mpi check's verdict from the MPI program's result line (cluster_cli/smoke/checks_mpi.py)."""

from __future__ import annotations

import json

from cluster_cli.smoke.checks_mpi import RESULT_MARK, _result_line, check_mpi, judge_mpi
from cluster_cli.smoke.report import Verdict
import smoke_fixtures as fx

GOOD = {"size": 4, "slurm_ntasks": 4, "sum": 10, "expected_sum": 10, "nodes": {"node1": 2, "node2": 2},
        "latency_us": 12.5, "latency_peer": 2, "iterations": 1000, "pmix": True, "library": "Open MPI v4.1.4"}


def test_one_world_over_two_nodes_with_an_exact_sum_passes_with_its_latency():
    result = judge_mpi(GOOD, 4, "pmix")
    assert result.verdict is Verdict.PASS, result.reason
    assert (result.figure, result.unit) == (12.5, "us")
    assert result.details["library"] == "Open MPI v4.1.4" and result.details["plugin"] == "pmix"


def test_ranks_that_each_see_a_world_of_one_fail():
    """What Debian's Open MPI does under a plugin it cannot use: every rank a singleton."""
    alone = {**GOOD, "size": 1, "sum": 1, "expected_sum": 1, "nodes": {"node1": 1}, "latency_us": None}
    result = judge_mpi(alone, 4, "pmi2")
    assert result.verdict is Verdict.FAIL
    assert "MPI_COMM_WORLD has 1 ranks, srun started 4" in result.reason


def test_a_wrong_sum_fails():
    result = judge_mpi({**GOOD, "sum": 9}, 4, "pmix")
    assert result.verdict is Verdict.FAIL and "all-reduce gave 9, expected 10" in result.reason


def test_ranks_on_one_node_only_fail():
    result = judge_mpi({**GOOD, "nodes": {"node1": 4}, "latency_us": None}, 4, "pmix")
    assert result.verdict is Verdict.FAIL and "no two nodes" in result.reason


def test_the_result_line_is_found_among_the_mpi_librarys_own_output():
    stdout = "some warning\n" + RESULT_MARK + json.dumps(GOOD) + "\nmore\n"
    assert _result_line(stdout) == GOOD
    assert _result_line("no result\n") is None
    assert _result_line(RESULT_MARK + "{broken\n") is None


def _skipped(**target: object) -> str:
    return fx.skip_reason(check_mpi, **target)


def test_the_check_skips_with_its_reason_where_it_cannot_run():
    assert "MPI is off" in _skipped()
    assert "no mpi4py" in _skipped(mpi_plugin="pmix")
    assert "needs 2 nodes" in _skipped(mpi_plugin="pmix", mpi4py=True, nodes=["n1"])
