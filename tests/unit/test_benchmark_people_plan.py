"""benchmarks/people_plan.py on a small inventory: its figures come from the real validation,
document, plan rows and module decision (every user to make on a host with none)."""

from __future__ import annotations

from unit_helpers import benchmark_module


def test_the_benchmark_measures_what_it_names() -> None:
    with benchmark_module("people_plan") as bench:
        rows = bench.measure(20, 4, 3)
        text = bench.section(rows, 20, 3)
    details = {what: detail for what, _, detail in rows}
    assert details["the people document"] == "24 groups, 20 users"
    assert details["plan rows, 3 hosts, no record"] == "3 rows of 44 items"
    assert details["plan rows, 3 hosts, one user added since"].startswith("3 rows: user bench-u0019: make (UID 30019")
    assert details["the module's check and commands on a host with none of them"] == "44 commands"
    assert "against <= 2 s: met." in text
