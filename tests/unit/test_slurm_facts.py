"""cluster_cli.slurm_facts: the parser, what a change needs (conf_change), the keys each series
documents (known_keys), series() and the supported upgrades (upgrade_path_problem).

Expectations that depend on a series' data are read from the data files (rules.json, the
slurm-<series>.json a man page gave), so a test checks that conf_change follows them; the few
fixed ones are what the man pages quoted beside them say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster_cli.slurm_facts import (
    ConfChange,
    UnknownSlurmVersion,
    conf_change,
    known_keys,
    rules_series,
    series,
    supported_series,
    upgrade_path_problem,
)
from cluster_cli.slurm_facts.change import CURATED_KEY_RULES
from cluster_cli.slurm_facts.parse import expand_hostlist, logical_lines, pairs, parse_conf

DATA = Path(__file__).resolve().parents[2] / "plugins" / "plugin_utils" / "slurm_facts" / "data"
RULES = json.loads((DATA / "rules.json").read_text())
# What each impact of the data asks of the deploy: (restart slurmctld, restart slurmd, reconfigure).
DEPLOY = {
    "reconfigure": (False, False, True),
    "restart_slurmd": (False, True, True),
    "restart_slurmctld": (True, True, False),
    "restart_slurmctld_slurmd": (True, True, False),
    "restart_all": (True, True, False),
}

SLURM_CONF = """\
# a cluster of three nodes
ClusterName=test
SlurmctldHost=ctl
SlurmctldPort=6817
SlurmdPort=6818
SelectType=select/cons_tres
SchedulerParameters=bf_interval=30
SlurmctldDebug=info
KillWait=30
NodeName=DEFAULT CPUs=4 RealMemory=1000
NodeName=node[1-3] NodeAddr=10.0.0.[1-3] Gres=gpu:1
PartitionName=debug Nodes=node[1-3] Default=YES MaxTime=01:00:00 State=UP
"""
GRES_CONF = "NodeName=node[1-3] Name=gpu File=/dev/nvidia0\n"
CGROUP_CONF = "CgroupPlugin=cgroup/v2\nConstrainCores=yes\n"
TOPOLOGY_CONF = "SwitchName=leaf1 Nodes=node[1-3]\n"
SLURMDBD_CONF = "DbdHost=db\nDbdPort=6819\nStorageType=accounting_storage/mysql\n"
FILES = {
    "slurm.conf": SLURM_CONF,
    "gres.conf": GRES_CONF,
    "cgroup.conf": CGROUP_CONF,
    "topology.conf": TOPOLOGY_CONF,
    "slurmdbd.conf": SLURMDBD_CONF,
}


def changed(version: str, file_name: str, old: str, new: str) -> ConfChange:
    before = dict(FILES)
    after = {**FILES, file_name: FILES[file_name].replace(old, new)}
    assert after[file_name] != before[file_name], f"{old!r} is not in {file_name}"
    return conf_change(version, before, after)


def flags(change: ConfChange) -> tuple[bool, bool, bool]:
    return change.restart_slurmctld, change.restart_slurmd, change.reconfigure


# ---- the parser --------------------------------------------------------------------------------


def test_logical_lines_drop_comments_and_blank_lines_and_join_continuations() -> None:
    text = "A=1 # one\n\n  # only a comment\nB=two\\\n three\nC=a\\#b\n"
    assert logical_lines(text) == ["A=1", "B=two three", "C=a#b"]


def test_pairs_keep_quoted_spaces() -> None:
    assert pairs('DownNodes=n1 Reason="disk failed" State=DOWN') == [
        ("DownNodes", "n1"), ("Reason", "disk failed"), ("State", "DOWN"),
    ]


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("gpu[008-010],login", ["gpu008", "gpu009", "gpu010", "login"]),
        ("r[1-2]n[1,3]", ["r1n1", "r1n3", "r2n1", "r2n3"]),
        ("single", ["single"]),
    ],
)
def test_expand_hostlist(expression: str, names: list[str]) -> None:
    assert expand_hostlist(expression) == names


def test_parse_conf_keys_records_by_name_and_applies_defaults() -> None:
    conf = parse_conf(SLURM_CONF, ["NodeName", "PartitionName"], ["NodeName"])
    assert list(conf.records["nodename"]) == ["node1", "node2", "node3"]
    assert conf.records["nodename"]["node2"] == {
        "cpus": "4", "realmemory": "1000", "nodeaddr": "10.0.0.2", "gres": "gpu:1",
    }
    assert conf.records["partitionname"]["debug"]["maxtime"] == "01:00:00"
    assert conf.settings["killwait"] == ("30",)
    assert conf.spelled["killwait"] == "KillWait"


def test_parse_conf_keeps_every_value_of_a_repeated_key_and_include_lines() -> None:
    conf = parse_conf("SlurmctldHost=a\nslurmctldhost=b\nInclude /etc/slurm/nodes.conf\n")
    assert conf.settings["slurmctldhost"] == ("a", "b")
    assert conf.settings["include"] == ("/etc/slurm/nodes.conf",)


# ---- conf_change: fixed cases, each as the quoted man page says ----------------------------------


@pytest.mark.parametrize(
    ("case", "version", "file_name", "old", "new", "expected"),
    [
        # slurm.conf(5) 22.05 notes nothing for partitions: the introduction's reconfigure applies
        ("partition MaxTime", "22.05", "slurm.conf", "MaxTime=01:00:00", "MaxTime=02:00:00", (False, False, True)),
        ("SlurmctldDebug", "22.05", "slurm.conf", "SlurmctldDebug=info", "SlurmctldDebug=debug", (False, False, True)),
        # "A restart of slurmctld and slurmd is required for changes to this parameter to take effect."
        ("SelectType", "22.05", "slurm.conf", "select/cons_tres", "select/linear", (True, True, False)),
        # scontrol(1) 22.05: "The slurmctld daemon and all slurmd daemons must also be restarted if nodes are added"
        ("node added", "22.05", "slurm.conf", "node[1-3] NodeAddr=10.0.0.[1-3]", "node[1-4] NodeAddr=10.0.0.[1-4]",
         (True, True, False)),
        # SchedulerParameters' option no_backup_scheduling: "A restart of slurmctld is required"
        ("no_backup_scheduling", "22.05", "slurm.conf", "bf_interval=30", "bf_interval=30,no_backup_scheduling",
         (True, True, False)),
        ("bf_interval", "22.05", "slurm.conf", "bf_interval=30", "bf_interval=60", (False, False, True)),
        # cluster-cli's file rule: any gres.conf change restarts every slurmd (stricter than gres.conf(5))
        ("gres.conf File", "22.05", "gres.conf", "/dev/nvidia0", "/dev/nvidia1", (False, True, True)),
        ("topology.conf", "22.05", "topology.conf", "leaf1", "leaf2", (False, False, True)),
        ("comment only", "22.05", "slurm.conf", "# a cluster of three nodes", "# another comment", (False, False, False)),
        ("key case", "22.05", "slurm.conf", "KillWait=30", "killwait=30", (False, False, False)),
        ("unknown key", "22.05", "slurm.conf", "KillWait=30", "KillWait=30\nKillWiat=30", (True, True, False)),
        # 24.11: scontrol reconfigure "will not be able to change the daemons' listening TCP port settings"
        ("SlurmdPort", "24.11", "slurm.conf", "SlurmdPort=6818", "SlurmdPort=6819", (False, True, True)),
    ],
)
def test_conf_change(case: str, version: str, file_name: str, old: str, new: str, expected: tuple) -> None:
    assert flags(changed(version, file_name, old, new)) == expected, case


def test_a_select_type_change_gives_one_reason_naming_key_action_and_source() -> None:
    change = changed("22.05.8-4+deb12u3", "slurm.conf", "select/cons_tres", "select/linear")
    assert change.reasons == ("slurm.conf: SelectType changed: restart slurmctld and slurmd (slurm.conf(5), Slurm 22.05)",)
    assert change.impact == "restart"


def test_an_unknown_key_restarts_both_and_says_it_is_the_conservative_choice() -> None:
    change = changed("26.05", "slurm.conf", "KillWait=30", "KillWait=30\nSlurmctldParamters=enable_configless")
    (reason,) = change.reasons
    assert "SlurmctldParamters" in reason and "conservative" in reason and "Slurm 26.05" in reason


def test_impact_strings() -> None:
    assert changed("22.05", "slurm.conf", "KillWait=30", "killwait=30").impact == "none"
    assert changed("22.05", "slurm.conf", "KillWait=30", "KillWait=60").impact == "reconfigure"
    assert changed("22.05", "slurm.conf", "SlurmdPort=6818", "SlurmdPort=6819").impact == "restart"


def test_a_slurmd_only_key_restarts_slurmd_and_reconfigures_slurmctld() -> None:
    # slurm.conf(5) 22.05 CoreSpecPlugin: "A restart of the slurmd daemons is required"
    change = changed("22.05", "slurm.conf", "KillWait=30", "KillWait=30\nCoreSpecPlugin=core_spec/none")
    assert flags(change) == (False, True, True)
    assert any("so that slurmctld reads the change" in reason for reason in change.reasons)


def test_a_slurmctld_only_key_restarts_every_slurmd_too_and_says_why() -> None:
    # slurm.conf(5) 22.05 StateSaveLocation: "A restart of slurmctld is required"
    change = changed("22.05", "slurm.conf", "KillWait=30", "KillWait=30\nStateSaveLocation=/srv/state")
    assert flags(change) == (True, True, False)
    assert any("restart slurmd as well" in reason for reason in change.reasons)


def test_auth_type_needs_every_daemon_restarted_slurmdbd_included() -> None:
    change = changed("22.05", "slurm.conf", "KillWait=30", "KillWait=30\nAuthType=auth/slurm")
    assert (change.restart_slurmctld, change.restart_slurmd, change.restart_slurmdbd) == (True, True, True)


def test_node_defaults_change_every_node_below_them() -> None:
    change = changed("22.05", "slurm.conf", "RealMemory=1000", "RealMemory=2000")
    (reason,) = change.reasons
    assert reason.startswith("slurm.conf: node node1,node2,node3 changed (RealMemory)")
    assert flags(change) == (True, True, False)


def test_a_node_added_to_a_hostlist_changes_no_other_node() -> None:
    change = changed("22.05", "slurm.conf", "node[1-3] NodeAddr=10.0.0.[1-3]", "node[1-4] NodeAddr=10.0.0.[1-4]")
    assert change.nodes_added == ("node4",) and change.nodes_removed == ()
    assert len(change.reasons) == 1


def test_nodes_removed_are_named_with_the_advice_to_drain_them() -> None:
    change = changed("22.05", "slurm.conf", "node[1-3] NodeAddr=10.0.0.[1-3]", "node[1-2] NodeAddr=10.0.0.[1-2]")
    assert change.nodes_removed == ("node3",)
    assert "drain them first" in change.reasons[0]


def test_a_changed_include_line_restarts_both() -> None:
    before = {"slurm.conf": SLURM_CONF + "Include /etc/slurm/a.conf\n"}
    after = {"slurm.conf": SLURM_CONF + "Include /etc/slurm/b.conf\n"}
    assert flags(conf_change("22.05", before, after)) == (True, True, False)


def test_a_first_deploy_restarts_both() -> None:
    change = conf_change("24.11", {}, {"slurm.conf": SLURM_CONF})
    assert flags(change) == (True, True, False)
    assert change.reasons == ("slurm.conf is new here: restart slurmctld and slurmd",)


def test_the_same_files_need_nothing() -> None:
    change = conf_change("22.05", FILES, dict(FILES))
    assert (change.impact, change.reasons) == ("none", ())


def test_an_unknown_version_is_refused() -> None:
    with pytest.raises(UnknownSlurmVersion, match="22.05, 24.11, 26.05"):
        conf_change("23.11.4", FILES, FILES)


# ---- conf_change follows each series' data -------------------------------------------------------


@pytest.mark.parametrize("name", supported_series())
@pytest.mark.parametrize(
    ("event", "old", "new"),
    [
        ("added", "node[1-3] NodeAddr=10.0.0.[1-3]", "node[1-4] NodeAddr=10.0.0.[1-4]"),
        ("removed", "node[1-3] NodeAddr=10.0.0.[1-3]", "node[1-2] NodeAddr=10.0.0.[1-2]"),
        ("changed", "Gres=gpu:1", "Gres=gpu:2"),
    ],
)
def test_nodes_follow_the_node_rule_of_the_series(name: str, event: str, old: str, new: str) -> None:
    impact = RULES["series"][name]["nodes"][event]
    assert flags(changed(name, "slurm.conf", old, new)) == DEPLOY[impact]


@pytest.mark.parametrize("name", supported_series())
def test_keys_follow_the_man_page_notes_of_the_series(name: str) -> None:
    data = json.loads((DATA / f"slurm-{name}.json").read_text())["files"]["slurm.conf"]
    curated = {key for rule in CURATED_KEY_RULES for key in RULES["series"][name].get(rule, {}).get("keys", {})}
    checked = 0
    for key, facts in data["keys"].items():
        if key in curated or key == "Include" or key.lower() in SLURM_CONF.lower():
            continue
        impact = facts.get("impact") or data["default"]["impact"]
        change = changed(name, "slurm.conf", "KillWait=30", f"KillWait=30\n{key}=x")
        assert flags(change) == DEPLOY[impact], key
        checked += 1
    assert checked > 150


@pytest.mark.parametrize("name", supported_series())
@pytest.mark.parametrize("key", ["SlurmctldPort", "AuthType", "AuthAltTypes"])
def test_listening_and_authentication_keys_restart_what_the_rule_says(name: str, key: str) -> None:
    impact = RULES["series"][name]["listening"]["keys"][key]
    assert flags(changed(name, "slurm.conf", "KillWait=30", f"KillWait=30\n{key}=x")) == DEPLOY[impact]


@pytest.mark.parametrize("name", supported_series())
def test_keys_read_when_slurmctld_starts_restart_what_the_rule_says(name: str) -> None:
    rule = RULES["series"][name].get("startup", {"keys": {}})
    for key, impact in rule["keys"].items():
        assert flags(changed(name, "slurm.conf", "KillWait=30", f"KillWait=30\n{key}=x")) == DEPLOY[impact]


def test_a_new_gpu_tres_restarts_slurmctld_on_22_05() -> None:
    # slurm.conf(5): "The TRES are automatically set up in the database on the start of the slurmctld."
    tres = "KillWait=30\nAccountingStorageTRES=gres/gpu"
    base = {**FILES, "slurm.conf": SLURM_CONF.replace("KillWait=30", tres)}
    after = {**base, "slurm.conf": base["slurm.conf"].replace("=gres/gpu", "=gres/gpu,gres/gpu:h100")}
    change = conf_change("22.05", base, after)
    assert flags(change) == (True, True, False)
    assert any("AccountingStorageTRES changed: restart slurmctld" in reason for reason in change.reasons)


@pytest.mark.parametrize("name", supported_series())
@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("State=UP", "DefMemPerGPU=1536 State=UP"),
        ("State=UP", "DefMemPerCPU=1024 State=UP"),
        ("KillWait=30", "KillWait=30\nDefMemPerCPU=1024"),
    ],
)
def test_default_memory_keys_take_effect_on_reconfigure(name: str, old: str, new: str) -> None:
    # slurm.conf(5) notes no restart for them; a partition line's change is a reconfigure.
    assert flags(changed(name, "slurm.conf", old, new)) == (False, False, True)


@pytest.mark.parametrize("name", supported_series())
@pytest.mark.parametrize("file_name", ["gres.conf", "cgroup.conf", "topology.conf"])
def test_a_file_change_does_at_least_what_its_file_rule_says(name: str, file_name: str) -> None:
    """The last key of each file has no note in any series: the file rule decides."""
    last = FILES[file_name].rstrip("\n")
    change = changed(name, file_name, last, last + "0")
    assert flags(change) == DEPLOY[RULES["files"][file_name]["floor"]]
    assert not change.restart_slurmdbd


@pytest.mark.parametrize("name", supported_series())
def test_a_slurmdbd_conf_change_follows_its_file_rule(name: str) -> None:
    assert RULES["files"]["slurmdbd.conf"]["floor"] == "restart_slurmdbd"
    change = changed(name, "slurmdbd.conf", "DbdPort=6819", "DbdPort=6820")
    assert (change.restart_slurmdbd, *flags(change)) == (True, False, False, False)


@pytest.mark.parametrize("name", supported_series())
@pytest.mark.parametrize("file_name", ["gres.conf", "cgroup.conf", "topology.conf", "slurmdbd.conf"])
def test_key_case_and_blank_lines_are_no_change(name: str, file_name: str) -> None:
    key = FILES[file_name].split("=", 1)[0]
    assert changed(name, file_name, key, "\n" + key.lower()).impact == "none"


# ---- known_keys, series ------------------------------------------------------------------------


@pytest.mark.parametrize("name", supported_series())
def test_known_keys_spell_keys_as_the_man_page(name: str) -> None:
    keys = known_keys(name, "slurm.conf")
    assert "SlurmctldParameters" in keys
    assert "SlurmctldParamters" not in keys
    assert {"NodeName", "PartitionName", "Include"} <= keys
    assert {"Name", "File", "Type", "Cores"} <= known_keys(name, "gres.conf")
    assert known_keys(name, "no-such.conf") == frozenset()


@pytest.mark.parametrize(
    ("version", "expected"),
    [("22.05.8-4+deb12u3", "22.05"), ("22.05.8", "22.05"), ("24.11", "24.11"), ("1:26.05.5-1", "26.05")],
)
def test_series(version: str, expected: str) -> None:
    assert series(version) == expected


@pytest.mark.parametrize("version", ["23.11.4", "", "slurm", "22.5", "2205"])
def test_series_of_a_version_without_rules_names_the_supported_series(version: str) -> None:
    with pytest.raises(UnknownSlurmVersion, match="supported series are 22.05, 24.11, 26.05") as raised:
        series(version)
    assert isinstance(raised.value, ValueError)


def test_rules_series_falls_back_to_the_oldest_series_and_says_so() -> None:
    assert rules_series("24.11.5-4+deb13u1") == ("24.11", "")
    name, why = rules_series("")
    assert name == supported_series()[0] and "restart the most" in why


# ---- upgrade_path_problem ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "target"),
    [("22.05.8", "22.05.11"), ("22.05", "23.11"), ("23.02", "24.11"), ("24.05", "24.11"), ("24.11", "26.05"),
     ("25.11.1", "26.05.5-1")],
)
def test_supported_upgrades(start: str, target: str) -> None:
    assert upgrade_path_problem(start, target) is None


def test_22_05_to_26_05_goes_through_intermediate_releases() -> None:
    problem = upgrade_path_problem("22.05.8-4+deb12u3", "26.05.5-1")
    assert problem is not None
    assert "25.11, 25.05, 24.11" in problem and "23.11 then 25.05" in problem
    assert "slurmdbd, then slurmctld, then slurmd" in problem


def test_22_05_to_24_11_is_refused_naming_23_11() -> None:
    problem = upgrade_path_problem("22.05", "24.11")
    assert problem is not None and "through 23.11 first" in problem


def test_a_downgrade_is_refused() -> None:
    problem = upgrade_path_problem("24.11", "22.05")
    assert problem is not None and "downgraded" in problem


def test_an_unknown_release_is_refused() -> None:
    with pytest.raises(UnknownSlurmVersion):
        upgrade_path_problem("19.05", "22.05")


def test_the_upgrade_table_follows_the_quoted_rule() -> None:
    """Two prior releases up to 24.05, three from 24.11 on (the upgrade guide's compatibility window)."""
    order = RULES["releases"]["order"]
    for target, prior in RULES["upgrade"]["upgrade_from"].items():
        index = order.index(target)
        window = 3 if index >= order.index("24.11") else 2
        assert prior == order[index - window:index][::-1], target
