"""The local cluster, deployed for real: daemons, jobs, GPU binding, accounting, idempotence."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from deployed import DeployedCluster, wait_for

from cluster_cli import slurm_associations
from cluster_cli.loader import load_cluster
from cluster_cli.slurm_accounting import accounting_document

pytestmark = pytest.mark.deploy

# Where roles/node_exporter's start without systemd (start-stop-daemon --make-pidfile) keeps its pid.
NODE_EXPORTER_PIDFILE = "/run/prometheus/prometheus-node-exporter.pid"
# slurmctld, slurmdbd, MariaDB, three slurmd, node_exporter, the Slurm exporter, Prometheus
DAEMONS = 9


def run(argv: list[str], timeout: float = 60) -> str:
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert completed.returncode == 0, f"{argv} failed: {completed.stdout}\n{completed.stderr}"
    return completed.stdout


def secrets_of(cluster: DeployedCluster) -> tuple[bytes, str]:
    directory = cluster.state_home / "cluster-cli" / "local" / "secrets"
    return (directory / "munge.key").read_bytes(), (directory / "slurmdbd_password").read_text().strip()


def test_three_nodes_idle_without_drain_reason(deployed_cluster: DeployedCluster) -> None:
    table = run(["sinfo", "--noheader", "--Node", "--format=%N|%T|%E"]).splitlines()
    states = {line.split("|")[0]: line.split("|")[1:] for line in table}
    assert set(states) == {"node1", "node2", "node3"}, table
    for node, (state, reason) in states.items():
        jobs = run(["squeue", "--all", "--noheader", f"--nodelist={node}", "--format=%i %u %j %T %M %l"]).strip()
        assert state == "idle", f"{node} is {state} ({reason}); its jobs: {jobs or 'none'}"
        assert reason == "none", f"{node} has a reason: {reason}"


def test_srun_runs_on_every_node(deployed_cluster: DeployedCluster) -> None:
    output = run(["srun", "-N3", "--ntasks-per-node=1", "bash", "-c", "echo $SLURMD_NODENAME"])
    assert sorted(output.split()) == ["node1", "node2", "node3"]


def test_gres_binds_exactly_one_fake_gpu(deployed_cluster: DeployedCluster) -> None:
    output = run(["srun", "-N1", "--gres=gpu:1", "bash", "-c", "echo CVD=$CUDA_VISIBLE_DEVICES $SLURMD_NODENAME"])
    match = re.search(r"CVD=(\S+) (node\d)", output)
    assert match, output
    assert match.group(1) == "0", f"one GPU per node, so the job sees index 0: {output}"
    # over-asking is refused: each node has one GPU
    refused = subprocess.run(
        ["srun", "-N1", "--gres=gpu:2", "--immediate=5", "true"], capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert refused.returncode != 0
    assert "Requested node configuration is not available" in refused.stderr or "gres" in refused.stderr.lower()


def test_job_recorded_in_sacct_with_gpu_tres(deployed_cluster: DeployedCluster) -> None:
    job = run(["sbatch", "--parsable", "--gres=gpu:1", "--output=/dev/null", "--wrap", "sleep 1", "--job-name=acct-check"]).strip().split(";")[0]
    deadline = time.monotonic() + 90
    line = ""
    while time.monotonic() < deadline:
        line = run(["sacct", "-j", job, "-X", "--noheader", "--parsable2", "--format=JobID,State,AllocTRES"]).strip()
        if "COMPLETED" in line and "gres/gpu" in line:
            break
        time.sleep(2)
    assert "COMPLETED" in line and "gres/gpu=1" in line, f"job {job} in sacct: {line!r}"


def test_status_reports_healthy_cluster(deployed_cluster: DeployedCluster) -> None:
    completed = deployed_cluster.cli("status", str(deployed_cluster.inventory), "--json", timeout=120)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = json.loads(completed.stdout)
    assert report["healthy"] is True
    assert report["controller_up"] is True
    assert report["accounting_up"] is True
    assert sorted(node["name"] for node in report["nodes"]) == ["node1", "node2", "node3"]


def test_secrets_are_private_and_never_shown(deployed_cluster: DeployedCluster) -> None:
    munge_key, password = secrets_of(deployed_cluster)
    assert Path("/etc/munge/munge.key").read_bytes() == munge_key
    assert oct(Path("/etc/munge/munge.key").stat().st_mode & 0o777) == "0o400"
    assert oct(Path("/etc/munge").stat().st_mode & 0o777) == "0o700"
    slurmdbd_conf = Path("/etc/slurm/slurmdbd.conf")
    assert oct(slurmdbd_conf.stat().st_mode & 0o777) == "0o600"
    assert password not in Path("/etc/slurm/slurm.conf").read_text()
    output = deployed_cluster.first_run.stdout + deployed_cluster.first_run.stderr
    assert password not in output
    logs = list((deployed_cluster.state_home / "cluster-cli" / "local" / "logs").glob("site-*.log"))
    assert logs, "the deploy wrote no log"
    for log in logs:
        text = log.read_text(errors="replace")
        assert password not in text, f"{log} shows the database password"
        assert oct(log.stat().st_mode & 0o777) == "0o600"


def test_redeploy_of_a_converged_cluster_runs_no_playbook(deployed_cluster: DeployedCluster) -> None:
    started = time.monotonic()
    again = deployed_cluster.cli("deploy", str(deployed_cluster.inventory))
    elapsed = time.monotonic() - started
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-2000:]
    assert "0 changes" in again.stdout and "PLAY" not in again.stdout, again.stdout[-3000:]
    print(f"deploy of the converged cluster took {elapsed:.2f} s (no playbook)")


def test_full_redeploy_changes_nothing(deployed_cluster: DeployedCluster) -> None:
    started = time.monotonic()
    again = deployed_cluster.cli("deploy", str(deployed_cluster.inventory), "--full")
    elapsed = time.monotonic() - started
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-2000:]
    assert re.search(r", 0 changed", again.stdout), again.stdout[-3000:]
    print(f"full no-op re-deploy took {elapsed:.1f} s")


def _slurmdbd_differences(document: dict) -> list[dict]:
    """The accounts module's own reading and comparison (cluster_cli/slurm_associations.py, a link
    to plugins/modules/slurm_associations.py), here against the real slurmdbd."""
    outputs = {name: run(argv) for name, argv in slurm_associations.read_commands(document["cluster"]).items()}
    return slurm_associations.diff(document, slurm_associations.current_state(outputs))


def _daemon_pids() -> dict[str, str]:
    names = ["slurmctld", "slurmdbd"] + [f"slurmd-node{index}" for index in (1, 2, 3)]
    return {name: Path(f"/run/slurm/{name}.pid").read_text().strip() for name in names}


def _kill_node_exporter() -> None:
    with open(NODE_EXPORTER_PIDFILE, encoding="ascii") as handle:
        pid = int(handle.read().split()[0])
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), "node_exporter gone", timeout=30, step=0.5)


def test_a_hand_edited_share_and_dead_daemons_show_in_status_and_plan_and_one_deploy_puts_all_back(
    deployed_cluster: DeployedCluster,
) -> None:
    """Accounts, QoS and limits land in slurmdbd. Then three things go wrong by hand: an admin's
    sacctmgr edit, a killed node_exporter and a killed slurmd. status names both dead daemons within
    seconds (slurmctld would notice the slurmd only after SlurmdTimeout), plan shows the share as
    drift and each daemon as a start, and one plain deploy puts all back without restarting any
    other Slurm daemon. (One deploy for all: each is a playbook run of about 45 s in CI.)"""
    inventory = str(deployed_cluster.inventory)
    document = accounting_document(load_cluster(deployed_cluster.inventory))
    assert _slurmdbd_differences(document) == []
    shown = run(["sacctmgr", "-n", "-P", "show", "assoc", "where", "account=team-b", "format=Account,User,Fairshare,GrpTRES"])
    assert "team-b||1|gres/gpu=2" in shown.splitlines(), shown
    qos = run(["sacctmgr", "-n", "-P", "show", "qos", "format=Name,Preempt,MaxTRESPU,GraceTime"]).splitlines()
    assert "high|low||00:05:00" in qos and "low||gres/gpu=2|00:05:00" in qos, qos
    up = deployed_cluster.cli("status", inventory, timeout=120)
    assert up.returncode == 0 and f"daemons: all {DAEMONS} running and listening" in up.stdout, up.stdout[-3000:]
    pids = _daemon_pids()
    run(["sacctmgr", "-i", "modify", "account", "where", "name=team-b", "cluster=local", "set", "GrpTRES=gres/gpu=5",
         "Fairshare=9"])
    _kill_node_exporter()
    run(["kill", "-KILL", pids["slurmd-node3"]])
    drift = _slurmdbd_differences(document)
    assert [change["fields"] for change in drift] == [{"Fairshare": [9, 1], "GrpTRES": [{"gres/gpu": 5}, {"gres/gpu": 2}]}]
    started = time.monotonic()
    down = deployed_cluster.cli("status", inventory, timeout=60)
    seconds = time.monotonic() - started
    assert down.returncode == 1, down.stdout[-3000:]
    for line in ("prometheus-node-exporter on localhost: not running", "slurmd@node3 on localhost: not running"):
        assert line in down.stdout, down.stdout[-3000:]
    assert seconds < 10, f"status took {seconds:.1f} s"
    planned = deployed_cluster.cli("plan", inventory, "--json")
    assert planned.returncode == 3, planned.stdout[-3000:] + planned.stderr[-2000:]
    changes = sorted((change["subject"], change["impact"], change["detail"]) for change in json.loads(planned.stdout)["changes"])
    assert changes == [("account team-b", "drift", "changed by hand since the last deploy: "
                        "Fairshare 9 -> 1; GrpTRES gres/gpu=5 -> gres/gpu=2"),
                       ("prometheus-node-exporter", "start", "not running: start"),
                       ("slurmd@node3", "start", "not running: start")], changes
    started = time.monotonic()
    again = deployed_cluster.cli("deploy", inventory, timeout=900)  # follows the plan, as a user's would
    elapsed = time.monotonic() - started
    assert again.returncode == 0, again.stdout[-4000:] + again.stderr[-2000:]
    assert _slurmdbd_differences(document) == []
    kept = {name: pid for name, pid in _daemon_pids().items() if name != "slurmd-node3"}
    assert kept == {name: pid for name, pid in pids.items() if name != "slurmd-node3"}, "another Slurm daemon restarted"
    back = deployed_cluster.cli("status", inventory, timeout=120)
    assert back.returncode == 0 and f"daemons: all {DAEMONS} running and listening" in back.stdout, back.stdout[-3000:]
    assert deployed_cluster.cli("plan", inventory).returncode == 0
    print(f"deploy putting back a hand-edited share and limit and two dead daemons took {elapsed:.1f} s")


def test_the_inventorys_people_are_made_and_plan_shows_a_user_who_leaves_it_as_a_lock(
    deployed_cluster: DeployedCluster, tmp_path: Path,
) -> None:
    inventory = load_cluster(deployed_cluster.inventory).inventory
    for person in inventory.people.users:
        entry = run(["getent", "passwd", person.name]).strip().split(":")
        assert entry[2:4] == [str(person.uid), str(person.uid)] and entry[6] == person.shell, entry
        assert run(["id", "-nG", person.name]).split() == [person.name, *person.groups]
        assert run(["getent", "shadow", person.name]).split(":")[7] == "", f"{person.name} is locked"
    managed = json.loads(Path("/var/lib/cluster-cli/people.json").read_text())
    assert managed == {"users": {person.name: person.uid for person in inventory.people.users}}
    text = deployed_cluster.inventory.read_text()
    leaving = text.replace("    - name: bob\n      uid: 5002\n      groups: [ml]\n      shell: /bin/sh\n", "")
    assert leaving != text, "the local inventory no longer has user bob as this test expects"
    edited = tmp_path / "inventory.yaml"
    edited.write_text(leaving)
    planned = deployed_cluster.cli("plan", str(edited), "--json")
    assert planned.returncode == 3, planned.stdout[-3000:] + planned.stderr[-2000:]
    changes = [(change["subject"], change["impact"], change["detail"]) for change in json.loads(planned.stdout)["changes"]]
    assert changes == [("people", "users and groups", "user bob: not in the inventory: lock (its files stay)")], changes


def test_check_diff_shows_a_drifted_line_changes_nothing_and_shows_no_secret(deployed_cluster: DeployedCluster) -> None:
    """A drifted line beside the password in slurmdbd.conf gives --diff a change to show with the
    secret in its context; Ansible's check mode reports it, changes nothing and prints no secret."""
    _, password = secrets_of(deployed_cluster)
    conf = Path("/etc/slurm/slurmdbd.conf")
    original = conf.read_text()
    assert f"StoragePass={password}" in original, "the password is not where this test looks for it"
    conf.write_text(re.sub(r"(?m)^StoragePort=.*$", "StoragePort=3307", original))
    try:
        # --full --check: Ansible's own check mode over every task (plain --check prints the plan)
        completed = deployed_cluster.cli("deploy", str(deployed_cluster.inventory), "--check", "--diff", "--full")
        assert "StoragePort=3307" in conf.read_text(), "check mode changed slurmdbd.conf"
    finally:
        conf.write_text(original)
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-2000:]
    assert re.search(r", [1-9][0-9]* changed", completed.stdout), completed.stdout[-3000:]
    assert password not in completed.stdout + completed.stderr
    newest = max(
        (deployed_cluster.state_home / "cluster-cli" / "local" / "logs").glob("site-*.log"), key=lambda p: p.stat().st_mtime
    )
    assert password not in newest.read_text(errors="replace")
