"""`plan` on the accounting data: what the accounts module would change in slurmdbd, each QoS,
account and association with its impact (sacctmgr only), and a hand edit in slurmdbd since the
last deploy as drift. The sacctmgr output is what 22.05 printed on the local cluster
(sacctmgr_recorded); the probe agent's reading of it runs real commands here, and
tests/deploy/test_10_deploy.py shows the whole path on the real slurmdbd."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from sacctmgr_recorded import APPLIED, EMPTY
from unit_helpers import SHIPPED_INVENTORIES

from cluster_cli.deployed import DeployedRecord, load_record
from cluster_cli.loader import load_cluster
from cluster_cli.plan import Impact, Plan, accounting_changes
from cluster_cli.probe import agent, probe_request
from cluster_cli.progress import plan_table
from cluster_cli.slurm_accounting import accounting_document, document_checksum
from cluster_cli.slurm_associations import read_commands

LOCAL = load_cluster(SHIPPED_INVENTORIES["local"])
APPLIED_RECORD = DeployedRecord(accounting={"localhost": document_checksum(accounting_document(LOCAL))})
HAND_EDITED = {**APPLIED, "assocs": APPLIED["assocs"].replace("team-b|||research|1|||gres/gpu=2|",
                                                                "team-b|||research|5|||gres/gpu=7|")}


def rows(outputs: dict[str, str], record: DeployedRecord | None = None, cluster=LOCAL) -> list[tuple[str, str, str]]:
    found = accounting_changes(cluster, "localhost", {"outputs": outputs, "error": None}, record or DeployedRecord())
    return [(change.subject, change.impact.value, change.detail) for change in found]


def test_slurmdbd_holding_the_inventorys_data_is_no_change() -> None:
    assert rows(APPLIED, APPLIED_RECORD) == []


def test_a_hand_edit_since_the_last_deploy_is_drift_with_both_values() -> None:
    assert rows(HAND_EDITED, APPLIED_RECORD) == [(
        "account team-b", "drift",
        "changed by hand since the last deploy: Fairshare 5 -> 1; GrpTRES gres/gpu=7 -> gres/gpu=2",
    )]


def test_a_difference_the_inventory_asks_for_is_sacctmgr_only() -> None:
    # no record of the last deploy's data, or other data than it applied: the inventory changed
    assert rows(HAND_EDITED) == [("account team-b", "sacctmgr only", "Fairshare 5 -> 1; GrpTRES gres/gpu=7 -> gres/gpu=2")]
    assert all(impact == Impact.ACCOUNTING.value for _, impact, _ in rows(EMPTY))


def test_a_new_slurmdbd_gets_the_cluster_then_everything_added() -> None:
    found = rows(EMPTY)
    assert found[0] == ("cluster local", "sacctmgr only", "not registered: add")
    subjects = [subject for subject, _, _ in found]
    assert subjects[1:] == ["qos high", "qos low", "account default", "account research", "account team-a",
                            "account team-b", "user smoke in default", "user smoke in team-a", "user smoke in team-b",
                            "user alice in team-a"]
    assert ("qos low", "sacctmgr only", "add: Description=low; GraceTime=300; MaxTRESPU=gres/gpu=2; "
            "PreemptMode=cluster; Priority=0; UsageFactor=1.0") in found
    assert ("account team-b", "sacctmgr only", "add below research: Description=team-b; Fairshare=1; "
            "GrpTRES=gres/gpu=2; Organization=research") in found


def test_what_the_inventory_no_longer_has_is_shown_as_a_removal() -> None:
    extra = {**APPLIED, "assocs": APPLIED["assocs"] + "team-b|alice|||1||||||||\n"}
    assert rows(extra, APPLIED_RECORD) == [
        ("user alice in team-b", "drift",
         "changed by hand since the last deploy: not in the inventory: remove (refused while it has jobs)"),
    ]


def test_slurmdbd_that_cannot_be_read_is_one_change_naming_why() -> None:
    found = accounting_changes(LOCAL, "localhost", {"outputs": {}, "error": "Connection refused"}, DeployedRecord())
    assert [(change.subject, change.impact, change.detail) for change in found] == [
        ("accounting data", Impact.ACCOUNTING, "cannot read slurmdbd (Connection refused): deploy applies the inventory's"),
    ]


def test_only_the_accounting_host_is_asked_for_the_accounting_data() -> None:
    request = probe_request(LOCAL, LOCAL.hosts["localhost"], [])
    assert request["accounting"] == {"conf": "/etc/slurm/slurm.conf", "commands": read_commands("local")}
    split = load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])  # slurmdbd on its own host, db1
    asked = {name for name, host in split.hosts.items() if probe_request(split, host, [])["accounting"]}
    assert asked == {"db1"}


def test_the_agent_returns_each_commands_output_or_the_first_error(tmp_path: Path) -> None:
    python = sys.executable
    found = agent.accounting_facts({"conf": str(tmp_path / "slurm.conf"), "commands": {
        "a": [python, "-c", "import os; print(os.environ['SLURM_CONF'])"], "b": [python, "-c", "print('b|1')"]}})
    assert found == {"outputs": {"a": f"{tmp_path / 'slurm.conf'}\n", "b": "b|1\n"}, "error": None}
    failed = agent.accounting_facts({"conf": "x", "commands": {
        "a": [python, "-c", "import sys; sys.exit('slurmdbd: Connection refused')"], "b": [python, "-c", "print(1)"]}})
    assert failed == {"outputs": {}, "error": "slurmdbd: Connection refused"}


def test_the_record_keeps_the_data_each_deploy_applied(tmp_path: Path) -> None:
    record = DeployedRecord(tmp_path / "deployed.json")
    record.remember_accounting("localhost", "abc")
    record.save()
    assert load_record(tmp_path).accounting == {"localhost": "abc"}
    record.forget(["localhost"])
    assert record.accounting == {}


def test_the_plan_table_shows_every_field_of_an_accounting_change() -> None:
    plan = Plan("local", "22.05.8", accounting_changes(LOCAL, "localhost", {"outputs": HAND_EDITED, "error": None},
                                                       APPLIED_RECORD))
    console = Console(width=300, record=True)
    console.print(plan_table(plan))
    text = console.export_text()
    assert "Fairshare 5 -> 1; GrpTRES gres/gpu=7 -> gres/gpu=2" in text and "more)" not in text
