"""Two controllers sharing StateSaveLocation: stopping the primary leaves the backup in charge,
with the jobs intact; the primary takes over again when it comes back."""

from __future__ import annotations

import pytest
from conftest import IDLE_AFTER_JOBS_S, ClusterView


def _ping(view: ClusterView) -> dict[str, str]:
    """{host: UP|DOWN} from `scontrol ping` on the submit host."""
    out = view.run(view.submit, "scontrol ping", check=False).stdout  # exit 1 while one is down
    states = {}
    for line in out.splitlines():
        # "Slurmctld(primary) at ctl1 is UP"
        words = line.split()
        if len(words) >= 4 and words[-2] == "is":
            states[words[-3]] = words[-1]
    return states


def _job_state(view: ClusterView, job: str) -> str | None:
    result = view.run(view.submit, f"scontrol -o show job {job}", check=False)
    if result.rc != 0:
        return None
    return view.job(job).get("JobState")


def test_backup_takes_over_with_jobs_intact_and_hands_back(view: ClusterView) -> None:
    backup = view.cluster.inventory.controllers.backup
    if backup is None:
        pytest.skip("no backup controller in this scenario's inventory")
    primary = view.controller
    state_dir = view.cluster.inventory.slurm.paths.state_dir
    marker = view.run(primary, f"stat -c %i {state_dir}").stdout
    assert view.run(backup, f"stat -c %i {state_dir}").stdout == marker, "StateSaveLocation is not shared"
    view.wait_until("both controllers answer", lambda: _ping(view) == {primary: "UP", backup: "UP"}, timeout=60)
    timeout = int(view.config()["SlurmctldTimeout"].split()[0])

    every = len(view.nodes)
    running = view.slurm(f"sbatch --parsable -N{every} -o /dev/null --wrap 'sleep 90'")
    view.wait_until(f"job {running} runs", lambda: view.job(running)["JobState"] == "RUNNING", timeout=60, every=1)
    pending = view.slurm(f"sbatch --parsable -N{every} -o /dev/null --wrap 'true'")
    started = view.job(running)["StartTime"]

    view.run(primary, "systemctl stop slurmctld")
    try:
        view.wait_until("the primary is seen down", lambda: _ping(view) == {primary: "DOWN", backup: "UP"},
                        timeout=60)
        # a backup in standby refuses job queries: an answer means it has taken control
        took = view.wait_until("the backup answers job queries", lambda: _job_state(view, running) == "RUNNING",
                               timeout=timeout * 3 + 30)
        print(f"backup in charge {took:.0f} s after the primary stopped (SlurmctldTimeout={timeout})")
        assert view.job(running)["StartTime"] == started
        assert view.job(pending)["JobState"] == "PENDING"
        view.slurm(f"scancel {running}")
        view.wait_until(f"job {pending} completes under the backup",
                        lambda: view.job(pending)["JobState"] == "COMPLETED", timeout=120)
        fresh = view.slurm("sbatch --parsable -N1 -o /dev/null --wrap true")
        view.wait_until(f"new job {fresh} completes", lambda: view.job(fresh)["JobState"] == "COMPLETED", timeout=60)
        # the backup took over with a job running: every node idle by itself once the jobs ended (issue 32)
        took = view.assert_nodes_idle_after([running, pending, fresh])
        print(f"nodes idle {took:.0f} s after the jobs under the backup completed (allowed: {IDLE_AFTER_JOBS_S} s)")
    finally:
        view.run(primary, "systemctl start slurmctld")
    view.wait_until("the primary is back and in charge", lambda: _ping(view) == {primary: "UP", backup: "UP"},
                    timeout=120)
    view.wait_nodes_idle(timeout=120)
