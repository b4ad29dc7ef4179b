"""benchmarks/container_ddp.py's pure parts (issue 35's figure): each round's two step times, and
the median of the rounds' ratios."""

from __future__ import annotations

import sys

import pytest
from unit_helpers import REPO


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import container_ddp

    yield container_ddp
    sys.path.remove(str(REPO / "benchmarks"))


def _check(name: str, step_ms: float, verdict: str = "pass") -> dict:
    return {"name": name, "verdict": verdict, "reason": "why", "details": {"step_time_ms": step_ms}}


def test_a_round_gives_the_step_time_outside_then_inside(bench) -> None:
    assert bench.step_times([_check("container", 18.0), _check("ddp", 17.0)]) == (17.0, 18.0)
    with pytest.raises(SystemExit, match="container: why"):
        bench.step_times([_check("ddp", 17.0), _check("container", 18.0, "fail")])


def test_the_figure_is_the_median_of_the_rounds_ratios(bench) -> None:
    text = bench.summary([(10.0, 10.2), (20.0, 19.0), (10.0, 11.0)])
    assert "median ratio inside/outside 1.020 (0.950-1.100)" in text and "3 rounds" in text
