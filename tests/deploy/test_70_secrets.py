"""The cluster's secrets on the real local cluster: a deploy with other secrets (another machine,
user or HOME) is refused before anything changes, naming the host; --rotate-secrets changes them
on every host with a job running, which completes, and Slurm works with the new ones.

Runs after test_60 (the cluster as the shipped inventory describes it) and before test_90's
teardown, which then uses the rotated secrets.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

from deployed import DeployedCluster, run_cli
from test_60_day2 import job_state, pids, run, submit

MUNGE_KEY = Path("/etc/munge/munge.key")
SLURMDBD_CONF = Path("/etc/slurm/slurmdbd.conf")


def secrets_dir(state_home: Path) -> Path:
    return state_home / "cluster-cli" / "local" / "secrets"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def text(done: subprocess.CompletedProcess[str]) -> str:
    """stdout and stderr with white space folded (the terminal output wraps long lines)."""
    return " ".join((done.stdout + done.stderr).split())


@pytest.mark.parametrize("other", ["munge key", "database password"])
def test_a_deploy_with_other_secrets_is_refused_naming_the_host_and_changes_nothing(
    deployed_cluster: DeployedCluster, tmp_path: Path, other: str
) -> None:
    """As from another machine, user or HOME: a state directory with no secrets (so new ones), or
    with the cluster's munge key and a new database password."""
    state_home = tmp_path / "other-state"
    if other == "database password":
        directory = secrets_dir(state_home)
        directory.mkdir(mode=0o700, parents=True)
        shutil.copy2(secrets_dir(deployed_cluster.state_home) / "munge.key", directory / "munge.key")
    before = (pids(), sha256(MUNGE_KEY), sha256(SLURMDBD_CONF))
    done = run_cli(state_home, "deploy", str(deployed_cluster.inventory))
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    if other == "munge key":
        assert "The munge key on localhost is not the one in" in text(done), done.stdout[-4000:]
    else:
        assert "The database password in /etc/slurm/slurmdbd.conf on localhost is not the one" in text(done)
    assert "--rotate-secrets" in text(done)
    assert (pids(), sha256(MUNGE_KEY), sha256(SLURMDBD_CONF)) == before, "a host was changed"
    password = (secrets_dir(state_home) / "slurmdbd_password").read_text().strip()
    assert password not in done.stdout + done.stderr


def test_rotate_secrets_with_a_job_running(deployed_cluster: DeployedCluster) -> None:
    own = secrets_dir(deployed_cluster.state_home)
    old_key, old_password = (own / "munge.key").read_bytes(), (own / "slurmdbd_password").read_text().strip()
    assert MUNGE_KEY.read_bytes() == old_key
    # the first deploy may have rotated already (an earlier test cluster's secrets were on the host)
    kept_before = set(own.glob("*.old"))
    job = submit("node1", 45)
    done = deployed_cluster.cli("deploy", str(deployed_cluster.inventory), "--rotate-secrets")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    new_key, new_password = (own / "munge.key").read_bytes(), (own / "slurmdbd_password").read_text().strip()
    assert new_key != old_key and new_password != old_password
    assert MUNGE_KEY.read_bytes() == new_key, "the host still holds the old key"
    assert f"StoragePass={new_password}" in SLURMDBD_CONF.read_text()
    backups = sorted(set(own.glob("*.old")) - kept_before)
    assert {path.name.split(".")[0] for path in backups} == {"munge", "slurmdbd_password"}
    assert all(stat.S_IMODE(path.stat().st_mode) == 0o600 and str(path) in text(done) for path in backups)
    output = done.stdout + done.stderr
    assert old_password not in output and new_password not in output
    # the job lives through the rotation and completes, and accounting (slurmdbd with the new
    # password, which MariaDB must know) records it
    deadline = time.monotonic() + 120
    while (state := job_state(job)) in ("RUNNING", "COMPLETING", "") and time.monotonic() < deadline:
        time.sleep(2)
    assert state == "COMPLETED", f"job {job}: {state}"
    step = run(["runuser", "-u", "smoke", "--", "srun", "-N1", "-w", "node2", "--chdir=/tmp", "hostname"], timeout=120)
    assert step.strip(), "a new srun printed nothing"
    assert deployed_cluster.cli("plan", str(deployed_cluster.inventory)).returncode == 0, "the plan is not empty"
