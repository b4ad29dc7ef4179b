"""The fairshare check's pure parts: reading sshare and sprio, the usage it arranges, its verdict,
and the skips that come before any job."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from cluster_cli.smoke import checks_fairshare as fs
from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.judge import judge_fairshare, under_served
from cluster_cli.smoke.report import Verdict
from cluster_cli.smoke.target import SmokeTarget

# sshare -P -n -a -A team-a,team-b -o SSHARE_FIELDS as root (the accounts' rows and the user's),
# from the local cluster after one recalculation
SSHARE_ROOT = """\
team-a||3|0.750000|14|0.608696||1.232143
team-a|smoke|1|1.000000|14|1.000000|1.000000|1.000000
team-b||1|0.250000|9|0.391304||0.638889
team-b|smoke|1|1.000000|9|1.000000|0.750000|1.000000
"""
# the same as the test user under PrivateData=usage: its own rows only, no usage yet in team-b
SSHARE_USER = """\
team-a|smoke|1|1.000000|2|0.000000|1.000000|inf
team-b|smoke|1|1.000000|0|0.000000|1.000000|inf
"""
SPRIO = "         12|0.0002629|     75000|     76000\n         11|0.0002629|     50000|     51000\n"

ACCOUNTS, SHARES = ["team-a", "team-b"], [3, 1]


def test_sshare_rows_of_the_accounts_and_of_the_user():
    rows = fs.parse_sshare(SSHARE_ROOT)
    account = rows[0]
    assert (account.account, account.user, account.norm_shares, account.raw_usage) == ("team-a", "", 0.75, 14)
    assert account.effective == pytest.approx(0.608696) and account.fairshare is None
    assert account.level_fs == pytest.approx(1.232143)
    assert rows[3].user == "smoke" and rows[3].fairshare == 0.75
    user = fs.parse_sshare(SSHARE_USER)
    assert user[1].raw_usage == 0 and user[1].level_fs == math.inf


def test_sprio_rows_by_job():
    jobs = fs.parse_sprio(SPRIO + "garbage line\n")
    assert jobs == {"12": {"age": 0.0002629, "fairshare": 75000.0, "priority": 76000.0},
                    "11": {"age": 0.0002629, "fairshare": 50000.0, "priority": 51000.0}}


@pytest.mark.parametrize(("shown", "seconds"), [("00:05:00", 300), ("00:01:00", 60), ("1-00:00:00", 86400),
                                                ("", 300)])
def test_calc_period_from_scontrol_show_config(shown, seconds):
    assert fs.calc_period_s({"PriorityCalcPeriod": shown} if shown else {}) == seconds


def test_billing_of_a_jobs_tres():
    assert fs.billing("cpu=2,mem=3G,node=1,billing=8,gres/gpu=8") == 8
    assert fs.billing("cpu=2,mem=3G,node=1") == 1


@pytest.mark.parametrize(
    ("high", "low", "which", "units"),
    [
        (2, 1, None, 0.0),                      # inside: more usage than the other, less than 3 times
        (12, 2, 1, 12 / math.sqrt(3) - 2),      # the larger share used too much: charge the other
        (2, 2, 0, 2 * math.sqrt(3) - 2),        # equal usage: charge the larger share
        (0, 0, None, 0.0),                      # (never reached: both accounts have run a job)
    ],
)
def test_arrangement_aims_between_the_usage_and_the_shares(high, low, which, units):
    chosen, amount = fs.arrangement(high, low, 3.0)
    assert chosen == which and amount == pytest.approx(units)
    if which is not None:
        charged = [high + amount * (which == 0), low + amount * (which == 1)]
        assert charged[1] < charged[0] < 3 * charged[1]  # usage says one thing, the shares the other
        assert fs.arrangement(charged[0], charged[1], 3.0)[0] is None


def test_arrangement_of_close_shares_still_has_room():
    assert fs.arrangement(1.2, 1.0, 1.5)[0] is None
    assert fs.arrangement(1.0, 1.0, 1.5)[0] == 0


def test_under_served_is_the_larger_share_for_its_usage():
    assert under_served(ACCOUNTS, SHARES, [14, 9]) == "team-a"   # 3/14 > 1/9
    assert under_served(ACCOUNTS, SHARES, [30, 9]) == "team-b"   # 3/30 < 1/9
    assert under_served(ACCOUNTS, SHARES, [3, 1]) is None
    assert under_served(ACCOUNTS, SHARES, [5, 0]) == "team-b"    # no usage: the most under-served


def after(fairshare_a=1.0, fairshare_b=0.75, usage=(14, 9), level=(1.232143, 0.638889)) -> dict:
    return {
        "team-a": {"raw_usage": usage[0], "effective": 0.608696, "norm_shares": 0.75, "level_fs": level[0],
                   "fairshare": fairshare_a},
        "team-b": {"raw_usage": usage[1], "effective": 0.391304, "norm_shares": 0.25, "level_fs": level[1],
                   "fairshare": fairshare_b},
    }


def pending(fs_a=75000.0, fs_b=50000.0, prio_a=76000.0, prio_b=51000.0, state="PENDING") -> dict:
    return {"team-b": {"job": "11", "age": 0.0003, "fairshare": fs_b, "priority": prio_b, "state": "PENDING"},
            "team-a": {"job": "12", "age": 0.0003, "fairshare": fs_a, "priority": prio_a, "state": state}}


def judged(before=(2, 1), shown=None, queued=None, sensitive=True, view="accounts", priority="priority/multifactor"):
    return judge_fairshare(ACCOUNTS, SHARES, list(before), shown or after(), queued or pending(), sensitive=sensitive,
                           waited_s=31.0, period_s=60, view=view, priority_type=priority, job_ids=["10", "11", "12"])


def test_the_under_served_account_first_in_sshare_and_sprio_passes_with_the_figures_named():
    result = judged()
    assert result.verdict is Verdict.PASS, result.reason
    for figure in ("team-a (shares 3) 2 -> 14", "team-b (shares 1) 1 -> 9", "team-a is the under-served one",
                   "EffectvUsage 0.609 (NormShares 0.75) FairShare 1", "EffectvUsage 0.391", "FairShare 0.75",
                   "sprio FAIRSHARE job 12 (team-a) 75000 vs job 11 (team-b) 50000", "priority 76000 vs 51000"):
        assert figure in result.reason
    assert result.figure == 25000 and not result.warnings
    assert result.details["accounts"]["team-a"]["raw_usage_before"] == 2


def test_a_pass_the_usage_alone_predicts_carries_a_warning():
    result = judged(shown=after(0.75, 1.0, usage=(30, 9), level=(0.4, 1.1)),
                    queued=pending(50000.0, 75000.0, 51000.0, 76000.0), sensitive=False)
    assert result.verdict is Verdict.PASS and "team-b is the under-served one" in result.reason
    assert "usage alone" in result.warnings[0]


@pytest.mark.parametrize(
    ("kwargs", "phrase"),
    [
        ({"shown": after(0.75, 1.0)}, "sshare FairShare of team-a is not above team-b's"),
        ({"shown": after(level=(0.6, 1.2))}, "sshare LevelFS 0.6 of team-a is not above 1.2 of team-b"),
        ({"queued": pending(fs_a=50000.0)}, "team-a's pending job has no larger FAIRSHARE part"),
        ({"queued": pending(prio_a=51000.0, prio_b=76000.0)}, "sprio ranks team-b's job first"),
        ({"queued": pending(state="RUNNING")}, "sprio has no factors for team-a's job 12 is RUNNING"),
        ({"before": (14, 1)}, "sshare RawUsage did not rise for team-a"),
        ({"shown": after(usage=(3, 1)), "before": (1, 0)}, "leaves the accounts tied"),
    ],
)
def test_each_way_fair_share_can_be_wrong_fails_with_it_named(kwargs, phrase):
    result = judged(**kwargs)
    assert result.verdict is Verdict.FAIL and phrase in result.reason, result.reason


def test_equal_factors_fail_as_under_priority_basic_or_without_a_fairshare_weight():
    flat = pending(fs_a=0.0, fs_b=0.0, prio_a=1.0, prio_b=2.0)
    result = judged(shown=after(1.0, 1.0), queued=flat, priority="priority/basic")
    assert result.verdict is Verdict.FAIL
    assert "(PriorityType=priority/basic)" in result.reason and "FairShare of team-a is not above" in result.reason


def test_the_test_users_view_judges_without_the_accounts_rows():
    shown = after()
    for account in shown.values():
        account.update(effective=None, norm_shares=None, level_fs=None)
    result = judged(shown=shown, view="user")
    assert result.verdict is Verdict.PASS and "EffectvUsage - (NormShares -)" in result.reason


SPEC = {"accounts": ACCOUNTS, "shares": SHARES, "qos": "normal", "gpu_caps": [None, 2], "neutral": "default"}


def context(tmp_path: Path, config: dict[str, str] | None = None, **fields) -> CheckContext:
    target = SmokeTarget(nodes=["node1"], work_dir=tmp_path, **{"accounting_enabled": True, "fairshare": SPEC, **fields})
    shown = config or {"PriorityCalcPeriod": "00:01:00", "PriorityType": "priority/multifactor"}
    return CheckContext(target, None, "1", None, tmp_path, shown,  # type: ignore[arg-type]
                        deadline=time.monotonic() + 180)


@pytest.mark.parametrize(
    ("fields", "config", "phrase"),
    [
        ({"fairshare": None}, None, "no two sibling accounts with different fair-share shares"),
        ({"accounting_enabled": False}, None, "accounting is off"),
        ({}, {"PriorityCalcPeriod": "01:00:00", "PriorityType": "priority/multifactor"},
         "recalculates the fair-share factors every 3600 s"),
    ],
)
def test_skips_before_any_job(tmp_path, fields, config, phrase):
    result = fs.check_fairshare(context(tmp_path, config, **fields))
    assert result.verdict is Verdict.SKIP and phrase in result.reason


def test_a_cluster_without_fair_share_fails_when_the_inventory_asks_for_it(tmp_path):
    # what molecule/mutation_check.py's no-fair-share mutant deploys: the inventory's shares, Slurm's basic priority
    result = fs.check_fairshare(context(tmp_path, {"PriorityCalcPeriod": "00:05:00", "PriorityType": "priority/basic"}))
    assert result.verdict is Verdict.FAIL
    assert result.reason == ("PriorityType is priority/basic: jobs are not ordered by fair share, though the inventory "
                             f"gives {ACCOUNTS[0]} and {ACCOUNTS[1]} shares {SHARES[0]}:{SHARES[1]} (priority.type: multifactor)")
