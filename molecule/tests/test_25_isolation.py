"""Users kept apart: pam_slurm_adopt on compute hosts, PrivateData, enforced associations, and a
database that listens on its own host only.

The inventory's people (molecule/shared/templates/cluster.yaml.j2) are two users the deploy made on
every host with the same ids and group, and the bed's key in their authorized_keys: ``alice`` gets
an association here (sacctmgr), ``mallory`` has none.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ClusterView

from testbed.network import netns_path

USERS = {"alice": 5101, "mallory": 5102}


@dataclass(frozen=True)
class Users:
    key: Path
    compute: str
    account: str


@pytest.fixture(scope="module")
def users(view: ClusterView) -> Iterator[Users]:
    if not view.cluster.inventory.node_access.pam_slurm_adopt:
        pytest.skip("node_access.pam_slurm_adopt is off in this scenario")
    if view.database is None:
        pytest.skip("accounting is disabled in this scenario")
    key = Path(view.cluster.inventory.ssh.private_key)
    account = view.cluster.inventory.accounting.account
    view.run(view.controller, f"sacctmgr --immediate add user alice account={account} >/dev/null; "
                              "sacctmgr --noheader --parsable2 show assoc user=alice format=user | grep -qx alice")
    try:
        yield Users(key, view.compute[0], account)
    finally:
        view.run(view.controller, "scancel --user=alice; scancel --user=mallory; "
                                  "sacctmgr --immediate delete user alice", check=False)
        for host in view.hosts:
            view.run(host, "pkill -u alice; pkill -u mallory", check=False)


def test_the_inventorys_people_have_the_same_ids_and_groups_on_every_host(view: ClusterView) -> None:
    wanted = {person.name: person.uid for person in view.cluster.inventory.people.users}
    assert wanted == USERS, "the bed inventory's people are not the users these tests log in as"
    found = {host: view.run(host, "for user in alice mallory; do getent passwd $user | cut -d: -f1,3,4,6,7; id -nG $user; "
                                  "done").stdout for host in view.hosts}
    expected = "".join(f"{name}:{uid}:{uid}:/home/{name}:/bin/bash\n{name} tbusers\n" for name, uid in USERS.items())
    assert found == dict.fromkeys(view.hosts, expected)


def _ssh(view: ClusterView, users: Users, user: str, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` on the compute host over SSH as ``user`` with the test key: what a user does.

    ssh runs inside the bed's network, not through the ssh_config's nc proxy: nc does not end
    when sshd closes a refused connection, so a refusal would hang the client."""
    namespace = netns_path(view.bed.state["bridge_ns"])
    argv = ["nsenter", f"--net={namespace}", "ssh", "-F", str(view.bed.run_dir / "ssh_config"),
            "-o", "ProxyCommand=none", "-i", str(users.key), "-o", "IdentitiesOnly=yes",
            "-o", "ControlMaster=no", "-o", "ControlPath=none", "-l", user, users.compute, command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def _submit(view: ClusterView, user: str, node: str, seconds: int = 300) -> str:
    job = view.run(view.submit, f"runuser -u {user} -- sbatch --parsable --chdir=/tmp --nodelist={node} --mem=64 "
                                f"--output=/dev/null --wrap 'sleep {seconds}'").stdout.strip()
    view.wait_until(f"job {job} runs", lambda: view.job(job).get("JobState") == "RUNNING", 60)
    return job


def test_a_user_without_a_job_on_the_node_is_refused_ssh(view: ClusterView, users: Users) -> None:
    view.run(view.controller, "scancel --user=alice", check=False)
    refused = _ssh(view, users, "alice", "true")
    assert refused.returncode != 0, f"alice logged in to {users.compute} without a job: {refused.stdout}"
    # OpenSSH 9.8+ (trixie) logs a connection from sshd-session, not from the listening sshd
    log = view.run(users.compute, "journalctl -q --no-pager -n 50 _COMM=sshd _COMM=sshd-session; "
                                  "tail -n 50 /var/log/auth.log 2>/dev/null", check=False).stdout
    assert "pam_slurm_adopt" in log or "PAM account configuration" in log, log[-2000:]


def test_an_ssh_login_lands_in_the_users_job_on_the_node(view: ClusterView, users: Users) -> None:
    node = view.cluster.hosts[users.compute].slurmd_nodes[0].name
    job = _submit(view, "alice", node)
    try:
        adopted = _ssh(view, users, "alice", "cat /proc/self/cgroup")
        assert adopted.returncode == 0, f"alice with job {job} was refused: {adopted.stderr}"
        assert f"/job_{job}/step_extern" in adopted.stdout, adopted.stdout
    finally:
        view.run(view.controller, f"scancel {job}", check=False)


def test_root_still_logs_in_without_a_job(view: ClusterView, users: Users) -> None:
    assert view.run(users.compute, "id -un").stdout.strip() == "root"


def test_a_user_sees_only_their_own_jobs(view: ClusterView, users: Users) -> None:
    node = view.cluster.hosts[users.compute].slurmd_nodes[0].name
    test_user = view.cluster.inventory.training.test_user
    theirs = _submit(view, test_user, node, 120)
    mine = _submit(view, "alice", node, 120)
    try:
        queue = view.run(view.submit, "runuser -u alice -- squeue --all --noheader --format=%i").stdout.split()
        assert mine in queue and theirs not in queue, f"alice's squeue: {queue}"
        everyone = view.run(view.submit, "squeue --all --noheader --format=%i").stdout.split()
        assert {mine, theirs} <= set(everyone), f"root's squeue: {everyone}"
        history = view.run(view.submit, "runuser -u alice -- sacct --allusers --noheader --parsable2 "
                                        "--format=JobID --starttime=now-1hour").stdout.split()
        assert theirs not in history, f"alice's sacct shows {test_user}'s job {theirs}: {history}"
    finally:
        view.run(view.controller, f"scancel {theirs} {mine}", check=False)


def test_a_job_from_a_user_without_an_association_is_rejected(view: ClusterView, users: Users) -> None:
    done = view.run(view.submit, "runuser -u mallory -- sbatch --chdir=/tmp --output=/dev/null --wrap true",
                    check=False)
    assert done.rc != 0, f"mallory's job was accepted: {done.stdout}"
    assert "Invalid account" in done.stderr, done.stderr


def test_the_accounting_database_listens_on_its_own_host_only(view: ClusterView) -> None:
    if view.database is None:
        pytest.skip("accounting is disabled in this scenario")
    listening = view.run(view.database, "ss --listening --tcp --numeric --no-header 'sport = :3306'").stdout.split()
    local = [field for field in listening if field.endswith(":3306")]
    assert local and all(field.startswith(("127.0.0.1:", "[::1]:")) for field in local), listening
    address = view.cluster.hosts[view.database].address
    reach = view.run(view.compute[0], f"timeout 5 bash -c '</dev/tcp/{address}/3306'", check=False)
    assert reach.rc != 0, f"{view.compute[0]} reached MariaDB at {address}:3306"
