"""What the smoke suite's accounting checks use from the inventory (smoke_control/accounting_targets):
the QoS the test user may use in each of its accounts, the QoS whose per-user GPU cap qos-limit
shows, and the QoS pair whose preemption triggers the preempt check."""

from __future__ import annotations

from unit_helpers import SHIPPED_INVENTORIES, edit, load

from cluster_cli.loader import load_cluster
from cluster_cli.smoke_control import accounting_targets
from cluster_cli.smoke_control.inventory_targets import smoke_plan

LOCAL_TEXT = SHIPPED_INVENTORIES["local"].read_text()
LOCAL = load_cluster(SHIPPED_INVENTORIES["local"])


def test_the_local_clusters_teams_give_both_checks_their_qos_and_account() -> None:
    assert accounting_targets.usable_qos(LOCAL) == {"default": {"normal"}, "team-a": {"normal", "high", "low"},
                                                    "team-b": {"normal"}}
    assert accounting_targets.qos_limit(LOCAL) == {"qos": "low", "account": "team-a", "gpus": 2, "deny": False}
    assert accounting_targets.preemption(LOCAL, 0) == {"qos": "low", "by": "high", "account": "team-a"}
    partition, group = smoke_plan(LOCAL)
    assert partition.qos_limit == group.qos_limit and partition.preemption is None
    # the preempt job holds every GPU of its two nodes (--exclusive), fake ones too: 2, within low's cap
    assert group.preemption == {"qos": "low", "by": "high", "account": "team-a"}


def test_a_preemptible_qos_whose_gpu_cap_the_job_exceeds_is_no_trigger() -> None:
    assert accounting_targets.preemption(LOCAL, 2) is not None
    assert accounting_targets.preemption(LOCAL, 3) is None  # low: MaxTRESPerUser gres/gpu=2


def test_a_qos_the_user_cannot_use_is_never_chosen() -> None:
    # team-a's QoS list without low: the user may use low in none of its accounts
    cluster = load(edit(LOCAL_TEXT, "qos: [normal, high, low]", "qos: [normal, high]"))
    assert accounting_targets.qos_limit(cluster) is None
    assert accounting_targets.preemption(cluster, 0) is None


def test_an_account_without_a_qos_list_inherits_its_parents() -> None:
    text = edit(LOCAL_TEXT, "    - name: research\n", "    - name: research\n      qos: [normal, high, low]\n")
    text = edit(text, "      qos: [normal, high, low]\n      default_qos: normal\n", "")
    usable = accounting_targets.usable_qos(load(text))
    assert usable["team-a"] == usable["team-b"] == {"normal", "high", "low"}


def test_the_users_own_qos_list_wins() -> None:
    cluster = load(edit(LOCAL_TEXT, "      accounts: [team-a, team-b]\n",
                        "      accounts: [team-a, team-b]\n      qos: [normal]\n"))
    assert accounting_targets.usable_qos(cluster) == {"default": {"normal"}, "team-a": {"normal"}, "team-b": {"normal"}}
    assert accounting_targets.preemption(cluster, 0) is None


def test_a_qos_preempted_by_cancel_is_no_trigger_for_a_requeue_check() -> None:
    cluster = load(edit(LOCAL_TEXT, "    - name: low\n", "    - name: low\n      preempt_mode: cancel\n"))
    assert accounting_targets.preemption(cluster, 0) is None


def test_deny_on_limit_is_passed_on() -> None:
    cluster = load(edit(LOCAL_TEXT, "    - name: low\n", "    - name: low\n      flags: [DenyOnLimit]\n"))
    assert accounting_targets.qos_limit(cluster)["deny"] is True


def test_without_accounting_neither_check_has_a_qos() -> None:
    text = LOCAL_TEXT[:LOCAL_TEXT.index("accounting:")] + "accounting:\n  enabled: false\n\n" + \
        LOCAL_TEXT[LOCAL_TEXT.index("login:"):]
    cluster = load(text)
    assert accounting_targets.usable_qos(cluster) == {}
    assert accounting_targets.qos_limit(cluster) is None and accounting_targets.preemption(cluster, 0) is None


def test_the_local_teams_are_the_fairshare_checks_pair() -> None:
    assert accounting_targets.fairshare(LOCAL) == {"accounts": ["team-a", "team-b"], "shares": [3, 1], "qos": "normal",
                                                   "gpu_caps": [None, 2], "neutral": "default"}
    partition, group = smoke_plan(LOCAL)
    assert partition.fairshare == group.fairshare == accounting_targets.fairshare(LOCAL)


def test_equal_shares_give_the_fairshare_check_no_pair() -> None:
    cluster = load(edit(LOCAL_TEXT, "      shares: 3\n", "      shares: 1\n"))
    assert accounting_targets.fairshare(cluster) is None


def test_an_inventory_without_fair_share_gives_the_fairshare_check_no_pair() -> None:
    assert accounting_targets.fairshare(load(LOCAL_TEXT + "priority:\n  type: basic\n")) is None


def test_the_larger_share_comes_first_and_the_pair_are_siblings() -> None:
    swapped = load(edit(LOCAL_TEXT, "      shares: 1\n", "      shares: 5\n"))
    assert accounting_targets.fairshare(swapped)["accounts"] == ["team-b", "team-a"]
    apart = load(edit(LOCAL_TEXT, "    - name: team-b\n      parent: research\n", "    - name: team-b\n"))
    assert accounting_targets.fairshare(apart) is None


def test_an_account_the_user_may_not_charge_is_no_part_of_the_pair() -> None:
    cluster = load(edit(LOCAL_TEXT, "      accounts: [team-a, team-b]\n", "      accounts: [team-a]\n"))
    assert accounting_targets.fairshare(cluster) is None
