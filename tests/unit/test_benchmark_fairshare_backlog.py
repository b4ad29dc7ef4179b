"""benchmarks/fairshare_backlog.py's pure parts: sacct's rows counted per account (only COMPLETED
tasks), and the goal: each account's part within 20% of its share's part (the run itself needs the
deployed local cluster)."""

from __future__ import annotations

from unit_helpers import benchmark_module


def test_completed_tasks_are_counted_per_account() -> None:
    with benchmark_module("fairshare_backlog") as bench:
        out = "team-a|COMPLETED\nteam-a|CANCELLED by 0\nteam-b|COMPLETED\nteam-a|COMPLETED\nother|COMPLETED\n"
        assert bench.completed_per_account(out, ("team-a", "team-b")) == (2, 1)


def test_the_goal_is_each_accounts_part_within_20_percent_of_its_share() -> None:
    with benchmark_module("fairshare_backlog") as bench:
        def run(completed: tuple[int, int]):
            return bench.Run(("team-a", "team-b"), (3, 1), completed, 12, 20, 3, {}, {})
        assert run((72, 28)).met  # 0.72 against 0.75 (4%), 0.28 against 0.25 (12%)
        assert not run((68, 32)).met  # team-b 0.32 against 0.25: 28% off
        assert not run((50, 50)).met and not run((0, 0)).met
        assert round(run((80, 20)).deviation(1), 2) == 0.2
