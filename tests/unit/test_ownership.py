"""Ownership: no verb changes a host or Slurm state that another cluster holds.

The owner evidence is built here as the probe agent answers it (the agent's side runs for real
below, on files of this machine); tests/deploy/test_60_day2.py proves the whole path on the real
local cluster with a second cluster's inventory.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cluster_cli import cli, ownership
from cluster_cli.deployed import DeployedRecord
from cluster_cli.errors import ExitCode
from cluster_cli.host_files import MUNGE_KEY_MARKER, SLURMDBD_CONF_MARKER
from cluster_cli.loader import load_cluster
from cluster_cli.plan import Impact
from cluster_cli.probe import HostProbe, agent

from test_plan import MUNGE_KEY, _converged_probe, _plan, _rendered
from unit_helpers import local_cluster, started

REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "inventories" / "local" / "inventory.yaml"
OURS = {"cluster_name": "local", "answering_cluster_name": "local", "daemons": ["slurmctld", "slurmd"],
        "munge_key": "ours", "slurmdbd_password": "ours"}


def _owner(**changes: object) -> dict[str, object]:
    return {**OURS, **changes}


@pytest.fixture(scope="module")
def local():
    return load_cluster(LOCAL)


def _finding(cluster, owner: dict[str, object], rotating: bool = False) -> str | None:
    """The one line a host with ``owner`` gets (None: no conflict)."""
    lines = ownership.conflict_lines({"localhost": ownership.host_conflicts(cluster, owner, rotating)})
    assert len(lines) <= 1, lines
    return lines[0] if lines else None


def test_a_host_of_this_cluster_with_its_secrets_is_no_conflict(local) -> None:
    assert _finding(local, _owner()) is None


def test_a_fresh_host_is_no_conflict_even_with_a_leftover_slurm_conf(local) -> None:
    fresh = {"cluster_name": "other", "answering_cluster_name": None, "daemons": [],
             "munge_key": "unmarked", "slurmdbd_password": "unmarked"}
    assert _finding(local, fresh) is None


def test_a_claimed_host_whose_slurm_conf_names_another_cluster_is_refused_naming_both(local) -> None:
    reason = _finding(local, _owner(cluster_name="hetero", answering_cluster_name=None), rotating=True)
    assert reason is not None
    assert "localhost: holds cluster 'hetero'" in reason and "not 'local'" in reason
    assert "slurmctld runs there" in reason and "Nothing was changed" in reason


def test_a_slurm_conf_of_another_cluster_with_only_our_marked_key_is_still_claimed(local) -> None:
    stopped = _owner(cluster_name="hetero", answering_cluster_name=None, daemons=[], munge_key="other")
    reason = _finding(local, stopped, rotating=True)
    assert reason is not None and "cluster-cli installed its munge key" in reason


def test_the_answering_slurmctld_of_another_cluster_is_refused(local) -> None:
    reason = _finding(local, _owner(answering_cluster_name="hetero"))
    assert reason is not None and "answers for cluster 'hetero', not 'local'" in reason


@pytest.mark.parametrize(("field", "name"), [("munge_key", "munge key"),
                                             ("slurmdbd_password", "database password in /etc/slurm/slurmdbd.conf")])
def test_secrets_cluster_cli_installed_that_are_not_ours_are_refused_unless_rotating(
    local, field: str, name: str,
) -> None:
    owner = _owner(**{field: "other"})
    reason = _finding(local, owner)
    assert reason is not None and reason.startswith(f"The {name} on localhost is not the one in this control node's")
    assert "--rotate-secrets" in reason
    assert _finding(local, owner, rotating=True) is None


def test_hosts_with_the_same_finding_share_one_line_each_secret_its_own(local) -> None:
    found = {"c1": ownership.host_conflicts(local, _owner(munge_key="other"), False),
             "ctl": ownership.host_conflicts(local, _owner(munge_key="other", slurmdbd_password="other"), False),
             "login": ownership.host_conflicts(local, _owner(), False)}
    lines = ownership.conflict_lines({host: findings for host, findings in found.items() if findings})
    assert [line[:40] for line in lines] == ["The munge key on c1, ctl is not the one ", "The database password in /etc/slurm/slur"]


def test_the_plan_lists_a_foreign_host_as_a_conflict_and_none_of_its_differences_as_changes(tmp_path: Path) -> None:
    """The reproduction of issue 31 item 0: another inventory, its own state_dir and secrets, on a
    host where cluster 'local' runs with a job: no "node remove" (a drain), no "drift"."""
    other = local_cluster(tmp_path, lambda text: text.replace("cluster_name: local", "cluster_name: hetero")
                     .replace("node[1-3]", "h100-[1-3]"))
    rendered = _rendered(other)
    probe = _converged_probe(other, rendered)
    probe.files.clear()
    probe.controller.update(state_cluster_name=None, jobs=[{"id": "7", "state": "RUNNING", "user": "smoke",
                                                            "nodes": "node1"}],
                            nodes=[{"name": f"node{n}", "state": "mixed", "reason": "none", "user": "Unknown",
                                    "time": "Unknown"} for n in (1, 2, 3)])
    foreign = HostProbe(**{**probe.__dict__, "owner": _owner(munge_key="other", slurmdbd_password="other")})
    plan = _plan(other, rendered, foreign)
    assert plan.exit_code is ExitCode.FAILURE
    assert [conflict.split(":")[0] for conflict in plan.conflicts] == ["localhost"]
    assert "cluster 'local', not 'hetero'" in plan.conflicts[0]
    assert plan.changes == [] and not plan.by_impact(Impact.NODE_REMOVE)
    # the same answer without the owner evidence is what drained another cluster's nodes before
    unguarded = _plan(other, rendered, probe)
    assert {change.subject for change in unguarded.by_impact(Impact.NODE_REMOVE)} == {"node1", "node2", "node3"}


def test_hosts_the_record_does_not_know_that_hold_this_clusters_files_and_key_are_recovered(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = HostProbe(**{**_converged_probe(cluster, rendered).__dict__, "owner": _owner()})
    assert _plan(cluster, rendered, probe).unrecorded == ["localhost"]
    known = DeployedRecord(hosts={"localhost": {}})
    assert _plan(cluster, rendered, probe, known).unrecorded == []
    other_key = HostProbe(**{**probe.__dict__, "owner": _owner(munge_key="unmarked")})
    assert _plan(cluster, rendered, other_key).unrecorded == []


def test_the_owner_markers_are_the_ones_the_roles_write() -> None:
    assert "/munge-key-installed-by-cluster-cli" in (REPO / "roles/munge/vars/main.yml").read_text()
    assert MUNGE_KEY_MARKER == "/var/lib/slurm/munge-key-installed-by-cluster-cli"
    assert f"__slurmdbd_conf_marker: {SLURMDBD_CONF_MARKER}\n" in (REPO / "roles/slurmdbd/vars/main.yml").read_text()
    assert "common_slurm_lib_dir: /var/lib/slurm\n" in (REPO / "roles/common/defaults/main.yml").read_text()


def test_the_agent_reads_the_cluster_name_and_compares_secrets_without_sending_them(tmp_path: Path) -> None:
    conf, key, marker = tmp_path / "slurm.conf", tmp_path / "munge.key", tmp_path / "marker"
    conf.write_text("# ClusterName=commented\nclustername = Local # trailing\nSlurmUser=slurm\n")
    key.write_bytes(MUNGE_KEY)
    dbd = tmp_path / "slurmdbd.conf"
    dbd.write_text("StorageUser=slurm\nStoragePass=s3cret\n")
    want = hashlib.sha256(MUNGE_KEY).hexdigest()
    request = {"slurm_conf": str(conf), "munge_key": {"path": str(key), "marker": str(marker), "want": want},
               "slurmdbd_conf": {"path": str(dbd), "marker": str(marker),
                                 "want": hashlib.sha256(b"s3cret").hexdigest()}}
    unmarked = agent.owner_facts(request)
    assert unmarked["cluster_name"] == "local" and unmarked["munge_key"] == "unmarked"
    marker.touch()
    assert agent.owner_facts(request)["munge_key"] == "ours"
    assert agent.owner_facts(request)["slurmdbd_password"] == "ours"
    request["munge_key"]["want"] = "0" * 64
    request["slurmdbd_conf"]["want"] = hashlib.sha256(b"other").hexdigest()
    answer = agent.owner_facts(request)
    assert answer["munge_key"] == "other" and answer["slurmdbd_password"] == "other"
    assert "s3cret" not in repr(answer) and want not in repr(answer)
    assert agent.conf_cluster_name(str(tmp_path / "absent.conf")) is None


def test_the_agent_finds_the_slurm_daemons_running_here(tmp_path: Path) -> None:
    program = tmp_path / "slurmd"
    program.symlink_to(sys.executable)
    child = started([str(program), "-c", "import time; time.sleep(30)"], timeout_s=10)
    try:
        assert "slurmd" in agent.running_programs(agent.SLURM_DAEMONS)
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root and unshare(1)")
def test_a_daemon_of_another_pid_namespace_is_a_containers_not_this_hosts(tmp_path: Path) -> None:
    """A test bed's nspawn hosts run slurmd on the same kernel: /proc shows them, and they are not
    this host's daemons (seen: the local cluster's deploy refused while the bed ran beside it)."""
    program = tmp_path / "slurmd"
    program.symlink_to(sys.executable)
    child = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", str(program), "-c", "import time; time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while not subprocess.run(["pgrep", "-f", f"^{program}"], capture_output=True, check=False).stdout and time.monotonic() < deadline:
            time.sleep(0.05)
        assert subprocess.run(["pgrep", "-f", f"^{program}"], capture_output=True, check=False).stdout, "the child did not start"
        assert "slurmd" not in agent.running_programs(("slurmd",))
    finally:
        child.kill()
        child.wait()
        subprocess.run(["pkill", "-f", f"^{program}"], check=False)


def _foreign_probes(cluster, requests):
    return {name: HostProbe(name, owner=_owner(cluster_name="hetero", answering_cluster_name="hetero"))
            for name in requests}


@pytest.mark.parametrize("argv", [
    ["teardown"], ["teardown", "--purge", "--yes", "local"], ["nodes", "drain", "node1", "--reason", "x"],
    ["nodes", "resume", "node1"], ["health"],
])
def test_every_verb_that_changes_hosts_or_slurm_state_refuses_a_foreign_host_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, argv: list[str],
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr(ownership, "probe_hosts", _foreign_probes)
    touched: list[str] = []
    for module, name in (("cluster_cli.commands.playbook_output", "run_playbook"), ("cluster_cli.node_lifecycle", "controller_command"),
                         ("cluster_cli.health", "run_health")):
        monkeypatch.setattr(f"{module}.{name}", lambda *args, _name=name, **kwargs: touched.append(_name))
    monkeypatch.setattr("cluster_cli.node_lifecycle.select", lambda cluster, names: [names])
    args = [*argv[:2], str(LOCAL), *argv[2:]] if argv[0] == "nodes" else [argv[0], str(LOCAL), *argv[1:]]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == ExitCode.FAILURE, result.output
    assert "localhost: the slurmctld running there answers for cluster 'hetero', not 'local'" in result.output
    assert touched == []


def test_health_that_only_reports_needs_no_ownership(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ownership, "probe_hosts", _foreign_probes)
    from cluster_cli.health import HealthReport
    monkeypatch.setattr("cluster_cli.health.run_health", lambda cluster, act: HealthReport("local", act, []))
    result = CliRunner().invoke(cli.main, ["health", str(LOCAL), "--no-act"])
    assert result.exit_code == ExitCode.OK, result.output
