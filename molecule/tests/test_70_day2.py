"""Day 2 on real hosts: a converged deploy, a compute host leaving the inventory, a fresh machine
joining, and a failed machine replaced under the same name, each with jobs running.

Runs after the other checks and leaves the cluster as the scenario's inventory describes it, for
the smoke suite after verify. "A fresh machine" is the same container with Slurm's and munge's
packages removed and their files, state and units deleted: what a deploy finds on a newly
installed machine (the training environment, users and SSH host keys stay).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from conftest import ClusterView, long_checks_only

from cluster_cli import hostlist

# `remove`, not `purge`: munge's purge script fails in the container (exit 1 from its postrm), and
# what it would delete goes with the rm below anyway.
WIPE = (
    "systemctl stop 'slurmd@*' munge; "
    "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q slurmd slurm-client munge >/dev/null && "
    "rm -rf /etc/slurm /etc/munge /var/lib/slurm /var/log/slurm /var/log/munge /run/slurm "
    "/etc/systemd/system/slurmd@.service /etc/systemd/system/multi-user.target.wants/slurmd@* && "
    "systemctl daemon-reload"
)


def _compute_group(document: dict) -> dict:
    return document["node_groups"][0]


def _without_last_host(view: ClusterView, tmp_path: Path) -> tuple[str, Path]:
    """A copy of the inventory without its last compute host; that host's name (= its node's)."""
    document = yaml.safe_load(view.inventory_path.read_text())
    group = _compute_group(document)
    nodes = hostlist.expand(group["nodes"])
    addresses = group["addresses"].split(",")
    group["nodes"] = hostlist.compress(nodes[:-1])
    group["addresses"] = ",".join(addresses[:-1])
    path = tmp_path / "without.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return nodes[-1], path


def _deploy(view: ClusterView, inventory: Path, *extra: str) -> tuple[str, float]:
    started = time.monotonic()
    done = view.cli("deploy", "--build-dir", str(view.build_dir), *extra, str(inventory))
    return done.stdout, time.monotonic() - started


def _plan(view: ClusterView, inventory: Path) -> tuple[int, dict]:
    done = view.cli("plan", "--json", "--build-dir", str(view.build_dir), str(inventory), check=False)
    assert done.returncode in (0, 3), done.stdout[-3000:] + done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout)


def _run_job(view: ClusterView, node: str, seconds: int) -> str:
    job = view.slurm(f"sbatch --parsable -N1 -w {node} -o /dev/null --wrap 'sleep {seconds}'")
    view.wait_until(f"job {job} runs", lambda: view.job(job)["JobState"] == "RUNNING", timeout=60, every=1)
    return job


def _slurmctld_pid(view: ClusterView) -> str:
    return view.run(view.controller, "systemctl show --property=MainPID --value slurmctld").stdout.strip()


@pytest.fixture(scope="module")
def shrunk(view: ClusterView, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    long_checks_only()  # a host leaves, joins and is replaced: three deploys, about 3 min
    if len(view.compute) < 2:
        pytest.skip("needs two compute hosts")
    return _without_last_host(view, tmp_path_factory.mktemp("day2"))


def test_a_converged_cluster_deploys_in_seconds_without_a_playbook(view: ClusterView) -> None:
    _deploy(view, view.inventory_path)  # whatever the checks before left pending
    output, seconds = _deploy(view, view.inventory_path)
    assert "0 changes" in output and "PLAY" not in output, output[-3000:]
    print(f"FIGURE converged deploy of the bed: {seconds:.1f} s")


def test_a_compute_host_that_leaves_the_inventory_is_drained_and_its_slurmd_stopped(
    view: ClusterView, shrunk: tuple[str, Path]
) -> None:
    gone, inventory = shrunk
    job = _run_job(view, gone, 20)
    output, seconds = _deploy(view, inventory, "--wait", "120")
    assert f"stopping slurmd on the hosts that left the inventory: {gone}" in output, output[-3000:]
    assert view.job(job)["JobState"] == "COMPLETED"
    assert gone not in view.slurm("sinfo -h -N -o %N", view.controller).split()
    assert view.run(gone, f"systemctl is-active slurmd@{gone}", check=False).stdout.strip() == "inactive"
    assert _plan(view, inventory)[0] == 0
    print(f"FIGURE retire one compute host (its 20 s job waited for): {seconds:.1f} s")


def test_a_fresh_machine_joins_while_a_job_runs_elsewhere(view: ClusterView, shrunk: tuple[str, Path]) -> None:
    added, _ = shrunk
    view.run(added, WIPE)
    other = hostlist.expand(_compute_group(yaml.safe_load(view.inventory_path.read_text()))["nodes"])[0]
    job = _run_job(view, other, 600)
    before = view.job(job)
    try:
        # one slurmd at a time: the new node makes every slurmd restart on Slurm 22.05
        output, seconds = _deploy(view, view.inventory_path, "--batch", "1")
        assert "1 compute host(s) per wave" in output, output[-3000:]
        after = view.job(job)
        assert (after["JobState"], after["StartTime"]) == ("RUNNING", before["StartTime"]), after
        view.wait_until(f"{added} is idle", lambda: view.node_state(added) == ("idle", "none"), timeout=120)
    finally:
        view.slurm(f"scancel {job}")
    assert _plan(view, view.inventory_path)[0] == 0
    print(f"FIGURE add one fresh compute host to the running bed (--batch 1): {seconds:.1f} s, jobs lost: 0")


def test_a_failed_machine_is_replaced_under_its_name_touching_no_other_host(
    view: ClusterView, shrunk: tuple[str, Path]
) -> None:
    node, _ = shrunk
    inventory = str(view.inventory_path)
    view.cli("nodes", "drain", inventory, node, "--reason", "replacing the machine")
    view.run(node, WIPE)
    code, planned = _plan(view, view.inventory_path)
    assert code == 3 and {change["host"] for change in planned["changes"]} == {node}, planned["changes"]
    controller = _slurmctld_pid(view)
    _output, seconds = _deploy(view, view.inventory_path)
    assert _slurmctld_pid(view) == controller
    view.cli("nodes", "resume", inventory, node)
    view.wait_until(f"{node} is idle", lambda: view.node_state(node) == ("idle", "none"), timeout=120)
    assert view.slurm(f"srun -N1 -w {node} hostname") == node
    print(f"FIGURE replace one compute host (deploy step): {seconds:.1f} s")
