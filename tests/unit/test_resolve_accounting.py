"""Accounts as a tree, users' associations and QoS: every bad input refused at its file:line
before any host is touched (model.py's per-field checks, resolve/accounting.py's cross-checks),
and what a valid one renders into slurm.conf (render/priority.py)."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, edit, load, problem, problems

from cluster_cli.render.slurm_conf import render_slurm_conf

TEAMS = edit(BASE, "accounting:\n  host: head\n", """\
accounting:
  host: head
  qos:
    - name: high
      priority: 100
      preempt: [low]
    - name: low
      flags: [DenyOnLimit]
      limits:
        max_tres_per_user: {gres/gpu: 1}
  accounts:
    - name: org
    - name: team-a
      parent: org
      shares: 3
      qos: [normal, high, low]
      default_qos: normal
    - name: team-b
      parent: org
      limits:
        grp_tres: {gres/gpu:a100: 4}
  users:
    - plain
    - name: alice
      account: team-a
      accounts: [team-b]
      uid: 5001
""")


def test_the_teams_inventory_is_valid_and_renders_priority_and_preemption() -> None:
    assert problems(TEAMS) == []
    lines = render_slurm_conf(load(TEAMS)).splitlines()
    for line in ("PriorityType=priority/multifactor", "PreemptType=preempt/qos", "PreemptMode=REQUEUE",
                 "PriorityWeightFairshare=100000", "PriorityDecayHalfLife=7-0", "PriorityFlags=MAX_TRES",
                 "SlurmctldParameters=preempt_send_user_signal"):
        assert line in lines


@pytest.mark.parametrize(
    ("old", "new", "snippet", "field", "message"),
    [
        ("      preempt: [low]\n", "      preempt: [lowest]\n", "preempt: [lowest]", "accounting.qos[0].preempt[0]",
         "QoS 'lowest' is not defined in accounting.qos"),
        ("      preempt: [low]\n", "      preempt: [high]\n", "preempt: [high]", "accounting.qos[0].preempt[0]",
         "QoS 'high' cannot preempt itself"),
        ("    - name: org\n", "    - name: org\n      parent: team-a\n", "parent: team-a", "accounting.accounts[0].parent",
         "accounts form a cycle: org -> team-a -> org (each account's parent)"),
        ("      account: team-a\n", "      account: team-c\n", "account: team-c", "accounting.users[1].account",
         "account 'team-c' is not defined in accounting.accounts"),
        ("      accounts: [team-b]\n", "      accounts: [nope]\n", "accounts: [nope]", "accounting.users[1].accounts[0]",
         "account 'nope' is not defined in accounting.accounts"),
        ("      shares: 3\n", "      shares: 0\n", "shares: 0", "accounting.accounts[1].shares",
         "Input should be greater than or equal to 1"),
        ("        grp_tres: {gres/gpu:a100: 4}\n", "        grp_tres: {gres/gpu:h100: 4}\n", "gres/gpu:h100",
         "accounting.accounts[2].limits.grp_tres['gres/gpu:h100']", "TRES 'gres/gpu:h100' is not tracked by this cluster"),
        ("    - plain\n", "    - Plain\n", "- Plain", "accounting.users[0].name", "String should match pattern"),
        ("      default_qos: normal\n", "      default_qos: nope\n", "default_qos: nope",
         "accounting.accounts[1].default_qos", "QoS 'nope' is not defined in accounting.qos"),
        ("      uid: 5001\n", "      uid: 64090\n", "uid: 64090", "accounting.users[1].uid",
         "UID 64090 is also training.test_user_uid"),
        ("      uid: 5001\n", "      uid: 999\n", "uid: 999", "accounting.users[1].uid",
         "Input should be greater than or equal to 1000"),
    ],
)
def test_each_bad_input_is_refused_at_its_line(old: str, new: str, snippet: str, field: str, message: str) -> None:
    text = edit(TEAMS, old, new)
    found = problems(text)
    expected = problem(text, snippet, field, message)
    assert any(line.startswith(expected) for line in found), found


def test_two_users_with_one_uid() -> None:
    text = edit(TEAMS, "    - plain\n", "    - name: plain\n      uid: 5001\n")
    found = problems(text)
    assert any(": accounting.users[1].uid: UID 5001 is also user plain's" in line for line in found), found


def test_a_user_or_account_twice_and_a_partition_qos_undefined() -> None:
    text = edit(TEAMS, "    - plain\n", "    - plain\n    - plain\n")
    assert any("accounting.users[1].name: user 'plain' is defined twice" in line for line in problems(text))
    text = edit(TEAMS, "    default: true\n", "    default: true\n    qos: gold\n")
    assert problems(text) == [problem(text, "qos: gold", "partitions[0].qos", "QoS 'gold' is not defined in accounting.qos")]


def test_accounting_data_without_accounting_is_refused() -> None:
    text = edit(TEAMS, "accounting:\n  host: head\n", "accounting:\n  enabled: false\n")
    found = problems(text)
    assert any("accounting.qos: needs accounting (slurmdbd)" in line for line in found), found


def test_priority_basic_and_no_preemption_render_slurms_plain_choices() -> None:
    text = TEAMS + "priority:\n  type: basic\n  preemption:\n    enabled: false\n"
    lines = render_slurm_conf(load(text)).splitlines()
    assert "PriorityType=priority/basic" in lines and "PreemptType=preempt/none" in lines
    assert not [line for line in lines if line.startswith(("PriorityWeight", "PreemptMode", "SlurmctldParameters"))]
    assert not [line for line in lines if "TRESBillingWeights" in line]


def test_a_priority_key_in_the_overrides_is_refused_naming_the_field() -> None:
    text = BASE + "slurm:\n  conf:\n    PriorityType: priority/basic\n"
    assert any("priority.type" in line for line in problems(text)), problems(text)


def test_gpus_are_billed_only_where_slurmdbd_tracks_them() -> None:
    # slurmctld stops at startup on a weight naming a TRES it does not track (found by the GPU kit's
    # rehearsal: "TRES weight 'GRES:gpu' is not a configured TRES type")
    with_accounting = render_slurm_conf(load(TEAMS)).splitlines()
    assert [line for line in with_accounting if "TRESBillingWeights=" in line and "GRES/gpu=1" in line]
    assert any(line.startswith("AccountingStorageTRES=") and "gres/gpu" in line for line in with_accounting)
    plain = edit(TEAMS, TEAMS[TEAMS.index("accounting:"):TEAMS.index("node_groups:")], "accounting:\n  enabled: false\n")
    lines = render_slurm_conf(load(plain)).splitlines()
    assert not [line for line in lines if "TRESBillingWeights" in line or "MAX_TRES" in line]
    assert "PriorityType=priority/multifactor" in lines
