"""plugins/modules/slurm_associations.py's pure parts: what it reads from sacctmgr's output, the difference
it computes against the document cluster_cli/slurm_accounting.py writes, the sacctmgr argument
lists it runs, and its refusal to remove what has jobs (the module runs for real in
tests/deploy/test_60_day2.py)."""

from __future__ import annotations

from sacctmgr_recorded import APPLIED, EMPTY
from unit_helpers import SHIPPED_INVENTORIES

from cluster_cli import slurm_associations as M  # a link to plugins/modules/slurm_associations.py
from cluster_cli.loader import load_cluster
from cluster_cli.slurm_accounting import accounting_document

DOCUMENT = accounting_document(load_cluster(SHIPPED_INVENTORIES["local"]))


def changes(outputs: dict[str, str], document: dict | None = None, remove: bool = True) -> list[dict]:
    return M.diff(document or DOCUMENT, M.current_state(outputs), remove)


def test_the_applied_state_needs_no_change() -> None:
    assert changes(APPLIED) == []
    assert M.commands([], "local", True) == []


def test_a_first_apply_adds_in_order_and_groups_the_adds() -> None:
    argvs = M.commands(changes(EMPTY), "local", False)
    words = [" ".join(argv[2:5]) for argv in argvs]
    assert words[:2] == ["add cluster local", "add qos high,low"]
    assert argvs[2][2:] == ["modify", "qos", "where", "name=high", "set", "Description=high", "GraceTime=300",
                            "Preempt=low", "PreemptMode=cluster", "Priority=100", "UsageFactor=1.0"]
    accounts = [argv[4] for argv in argvs if argv[2:4] == ["add", "account"]]
    # parents before children; accounts that differ only in what sacctmgr sets itself (Description:
    # the name; Organization: the parent's, or its own below root) are one call
    assert accounts == ["default,research", "team-a", "team-b"]
    team_a = next(argv for argv in argvs if argv[2:5] == ["add", "account", "team-a"])
    assert "Description=team-a" not in team_a and "Organization=research" not in team_a
    users = [argv for argv in argvs if argv[2:4] == ["add", "user"]]
    assert [argv[4:7] for argv in users] == [
        ["smoke", "cluster=local", "account=default"],
        ["smoke", "cluster=local", "account=team-a"],
        ["smoke", "cluster=local", "account=team-b"],
        ["alice", "cluster=local", "account=team-a"],
    ]


def test_many_users_with_the_same_settings_are_one_add() -> None:
    document = {**DOCUMENT, "users": [
        {**DOCUMENT["users"][0], "name": f"u{index}", "accounts": ["team-a"], "DefaultAccount": "team-a"}
        for index in range(500)
    ]}
    argvs = M.commands(changes(APPLIED, document, remove=False), "local", True)
    assert len(argvs) == 1 and argvs[0][4] == ",".join(f"u{index}" for index in range(500))


def test_a_hand_edited_limit_and_share_are_put_back() -> None:
    edited = {**APPLIED, "assocs": APPLIED["assocs"].replace("team-b|||research|1|||gres/gpu=2|", "team-b|||research|5|||gres/gpu=7|")}
    found = changes(edited)
    assert found == [{"kind": "account", "action": "modify", "name": "team-b",
                      "fields": {"Fairshare": [5, 1], "GrpTRES": [{"gres/gpu": 7}, {"gres/gpu": 2}]}}]
    assert M.commands(found, "local", True) == [[
        "sacctmgr", "--immediate", "modify", "account", "where", "name=team-b", "cluster=local", "set",
        "Fairshare=1", "GrpTRES=gres/gpu=2",
    ]]


def test_a_limit_dropped_from_the_inventory_is_cleared_with_minus_one() -> None:
    document = {**DOCUMENT, "qos": [dict(DOCUMENT["qos"][0]), {**DOCUMENT["qos"][1], "MaxTRESPU": {}}]}
    found = changes(APPLIED, document)
    assert found == [{"kind": "qos", "action": "modify", "name": "low", "fields": {"MaxTRESPU": [{"gres/gpu": 2}, {}]}}]
    assert M.commands(found, "local", True)[0][-1] == "MaxTRESPU=gres/gpu=-1"


def test_what_the_inventory_dropped_is_removed_users_then_children_then_qos() -> None:
    document = {**DOCUMENT, "qos": DOCUMENT["qos"][:1], "accounts": DOCUMENT["accounts"][:1],
                "users": [{**DOCUMENT["users"][0], "accounts": ["default"]}]}
    document["qos"] = [{**document["qos"][0], "Preempt": []}]
    found = [(change["kind"], change["action"], change["name"], change.get("account")) for change in changes(APPLIED, document)]
    assert found == [
        ("qos", "modify", "high", None),
        ("user", "remove", "alice", "team-a"),
        ("user", "remove", "smoke", "team-a"),
        ("user", "remove", "smoke", "team-b"),
        ("account", "remove", "team-a", None),
        ("account", "remove", "team-b", None),
        ("account", "remove", "research", None),
        ("qos", "remove", "low", None),
    ]
    assert changes(APPLIED, document, remove=False) == [changes(APPLIED, document)[0]]
    # one call per account's users, siblings together, children before their parent
    deletes = [argv[2:] for argv in M.commands(changes(APPLIED, document), "local", True) if argv[2] == "delete"]
    assert deletes == [
        ["delete", "user", "where", "name=alice,smoke", "account=team-a", "cluster=local"],
        ["delete", "user", "where", "name=smoke", "account=team-b", "cluster=local"],
        ["delete", "account", "where", "name=team-a,team-b", "cluster=local"],
        ["delete", "account", "where", "name=research", "cluster=local"],
        ["delete", "qos", "where", "name=low"],
    ]


def test_removing_what_has_jobs_is_refused_unless_forced() -> None:
    document = {**DOCUMENT, "accounts": DOCUMENT["accounts"][:3], "users": [{**DOCUMENT["users"][0], "accounts": ["default", "team-a"]}]}
    found = changes(APPLIED, document)
    jobs = [("team-b", "smoke"), ("team-b", "smoke"), ("default", "smoke")]
    assert M.refusals(found, jobs, force=False) == [
        "user smoke in account team-b has 2 running or pending job(s)",
        "account team-b has 2 running or pending job(s)",
    ]
    assert M.refusals(found, jobs, force=True) == []
    assert M.refusals(found, [("default", "smoke")], force=False) == []


def test_slurm_root_and_normal_are_never_removed() -> None:
    document = {"cluster": "local", "qos": [], "accounts": [], "users": []}
    names = {(change["kind"], change["name"]) for change in changes(APPLIED, document)}
    assert ("account", "root") not in names and ("user", "root") not in names and ("qos", "normal") not in names


def test_unset_qos_fields_are_slurms_inherited_ones() -> None:
    # team-b sets no QoS: whatever Slurm shows there (inherited) is left alone
    shown = {**APPLIED, "assocs": APPLIED["assocs"].replace("team-b|||research|1||", "team-b|||research|1|normal|normal")}
    assert changes(shown) == []


def test_values_compare_in_slurms_units() -> None:
    assert M.minutes("1-00:00:00") == 1440 and M.minutes("2-12") == 3600 and M.minutes("01:30:00") == 90
    assert M.minutes("90") == 90 and M.minutes("") is None and M.minutes("UNLIMITED") is None
    assert M.seconds("00:05:00") == 300 and M.seconds(300) == 300 and M.seconds("1-00:00:01") == 86401
    assert M.tres("cpu=4,mem=1G,gres/gpu=2") == {"cpu": 4, "mem": 1024, "gres/gpu": 2}
    assert M.tres({"mem": "64G", "gres/gpu": 8}) == {"mem": 65536, "gres/gpu": 8}
    assert M.normal("Flags", "DenyOnLimit,NoReserve") == M.normal("Flags", ["NoReserve", "DenyOnLimit"])


def test_limits_on_tres_slurmdbd_lacks_wait_for_slurmctld_or_are_left_out() -> None:
    known = M.known_tres("cpu|\nmem|\nenergy|\nnode|\nbilling|\nfs|disk\nvmem|\npages|\n")
    assert M.unknown_tres(DOCUMENT, known) == ["gres/gpu"]
    assert M.unknown_tres(DOCUMENT, known | M.known_tres("gres|gpu\ngres|gpu:fake\n")) == []
    trimmed = M.without_tres(DOCUMENT, ["gres/gpu"])
    assert M.unknown_tres(trimmed, known) == []
    assert [qos["MaxTRESPU"] for qos in trimmed["qos"]] == [{}, {}]
    # on the first run (before slurmctld) the rest is applied; the limit comes with the run after it
    assert [change["fields"].get("MaxTRESPU") for change in changes(EMPTY, trimmed) if change["kind"] == "qos"] == [None, None]
