"""Day 2 on the real local cluster: plan, minimal-impact deploys, node add/remove, drift, drains.

Runs after the smoke tests and leaves the cluster as the shipped inventory describes it, for
test_90's teardown. Jobs are real `sbatch` jobs of the test user; pids are read from the pid
files slurm.conf names, so "not restarted" means the very same processes.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from deployed import DeployedCluster, run_cli

RUN_DIR = Path("/run/slurm")


def run(argv: list[str], timeout: float = 60) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=True).stdout


def submit(node: str, seconds: int) -> str:
    """A job of the test user on ``node``; its id once it runs."""
    job = run(["runuser", "-u", "smoke", "--", "sbatch", "--parsable", f"--nodelist={node}", "--chdir=/tmp",
               "--output=/dev/null", f"--wrap=sleep {seconds}"]).strip().split(";")[0]
    deadline = time.monotonic() + 60
    while job_state(job) != "RUNNING":
        assert time.monotonic() < deadline, f"job {job} did not start: {job_state(job)}"
        time.sleep(0.5)
    return job


def job_state(job: str) -> str:
    out = run(["squeue", "--noheader", "--states=all", f"--jobs={job}", "--format=%T"]).strip()
    if out:
        return out
    return run(["sacct", "--noheader", "--parsable2", f"--jobs={job}", "--format=State", "-X"]).strip()


def pids() -> dict[str, str]:
    return {path.name: path.read_text().strip() for path in RUN_DIR.glob("slurm*.pid")}


def nodes() -> dict[str, tuple[str, str]]:
    lines = run(["sinfo", "--noheader", "--Node", "--format=%N|%T|%E"]).splitlines()
    return {line.split("|")[0]: tuple(line.split("|")[1:]) for line in lines}


def settled_nodes(expected: dict[str, tuple[str, str]], timeout_s: float = 60) -> dict[str, tuple[str, str]]:
    """``nodes()`` once it equals ``expected``, or as it is when ``timeout_s`` ran out: a node just
    resumed or restarted shows ``idle*`` until its slurmd answers again."""
    deadline = time.monotonic() + timeout_s
    while (found := nodes()) != expected and time.monotonic() < deadline:
        time.sleep(1)
    return found


def inventory_with(cluster: DeployedCluster, tmp_path: Path, name: str, *edits: tuple[str, str]) -> str:
    text = cluster.inventory.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return str(path)


FOUR_NODES = (("nodes: node[1-3]", "nodes: node[1-4]"), ("nvidia[0-2]", "nvidia[0-3]"))
WITHOUT_NODE3 = (("nodes: node[1-3]", "nodes: node[1-2,4]"), ("nvidia[0-2]", "nvidia[0-1,3]"))


def test_plan_of_the_converged_cluster_is_empty(deployed_cluster: DeployedCluster) -> None:
    started = time.monotonic()
    done = deployed_cluster.cli("plan", str(deployed_cluster.inventory), "--json")
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["changes"] == []
    print(f"plan of the converged local cluster took {elapsed:.2f} s")


def test_a_partition_change_is_applied_by_reconfigure_with_the_job_running(
    deployed_cluster: DeployedCluster, tmp_path: Path
) -> None:
    job = submit("node1", 600)
    changed = inventory_with(deployed_cluster, tmp_path, "maxtime", ('max_time: "01:00:00"', 'max_time: "02:00:00"'))
    planned = deployed_cluster.cli("plan", changed, "--json")
    assert planned.returncode == 3, planned.stdout[-3000:] + planned.stderr[-2000:]
    impacts = {change["impact"] for change in json.loads(planned.stdout)["changes"]}
    assert impacts == {"file change", "reconfigure"}, impacts
    before = pids()
    applied = deployed_cluster.cli("deploy", changed)
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr[-2000:]
    assert pids() == before, "a daemon was restarted for a reconfigure-only change"
    assert "MaxTime=02:00:00" in run(["scontrol", "show", "partition", "debug"])
    assert job_state(job) == "RUNNING"
    assert deployed_cluster.cli("plan", changed).returncode == 0
    run(["scancel", job])


def step_pids() -> set[str]:
    """The slurmstepd processes of running jobs (they must outlive a slurmd restart)."""
    found = subprocess.run(["pgrep", "-f", r"^slurmstepd: \[[0-9]+"], capture_output=True, text=True, check=False)
    return set(found.stdout.split())


def log_lines(output: str) -> list[str]:
    """The lines of the full Ansible log whose path a deploy printed."""
    path = next(line.split("full log: ", 1)[1] for line in output.splitlines() if "full log: " in line)
    return Path(path.strip()).read_text().splitlines()


def test_a_change_that_restarts_slurmd_goes_one_node_at_a_time_and_the_job_runs_on(
    deployed_cluster: DeployedCluster, tmp_path: Path
) -> None:
    job = submit("node1", 600)
    steps = step_pids()
    assert steps, "no slurmstepd found for the running job"
    cgroup_key = ("  version: auto\n", "  version: auto\n  overrides:\n    AllowedRAMSpace: 100\n")
    changed = inventory_with(deployed_cluster, tmp_path, "cgroup", cgroup_key)
    planned = json.loads(deployed_cluster.cli("plan", changed, "--json").stdout)
    restarts = sorted(change["subject"].removeprefix("slurmd@") for change in planned["changes"]
                      if change["impact"] == "restart slurmd")
    assert restarts == ["node1", "node2", "node3"], planned["changes"]
    before = pids()
    applied = deployed_cluster.cli("deploy", changed, "--batch", "1")
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr[-2000:]
    after = pids()
    restarted = [node for node in restarts if after[f"slurmd-{node}.pid"] != before[f"slurmd-{node}.pid"]]
    assert restarted == restarts, (before, after)
    assert after["slurmctld.pid"] == before["slurmctld.pid"]
    assert job_state(job) == "RUNNING" and steps <= step_pids(), "the job's slurmstepd did not survive"
    # each node was stopped only after slurmctld had seen the one before it start again
    tasks = [line for line in log_lines(applied.stdout) if line.startswith(("TASK [", "RUNNING HANDLER ["))]
    order = [next(i for i, line in enumerate(tasks) if f"{what} {node}]" in line)
             for node in restarts for what in ("Stop before the restart: slurmd",
                                               "Wait until slurmctld sees the batch start again:")]
    assert order == sorted(order), "\n".join(tasks[-40:])
    run(["scancel", job])
    # No deploy back to the shipped inventory here: the next test that deploys (adding a node) does
    # that from whatever was deployed before it (one playbook run less in CI).


def test_a_hand_edit_shows_as_drift_on_that_host_and_file(deployed_cluster: DeployedCluster, tmp_path: Path) -> None:
    conf = Path("/etc/slurm/cgroup.conf")
    original = conf.read_text()
    conf.write_text(original + "# edited by hand\n")
    try:
        planned = deployed_cluster.cli("plan", str(deployed_cluster.inventory), "--json")
    finally:
        conf.write_text(original)
    assert planned.returncode == 3, planned.stdout[-3000:] + planned.stderr[-2000:]
    drift = [change for change in json.loads(planned.stdout)["changes"] if change["impact"] == "drift"]
    assert [(change["host"], change["subject"]) for change in drift] == [("localhost", str(conf))]
    assert "-# edited by hand" in drift[0]["diff"]


def test_adding_a_node_leaves_a_running_job_alone(deployed_cluster: DeployedCluster, tmp_path: Path) -> None:
    job = submit("node1", 600)
    four = inventory_with(deployed_cluster, tmp_path, "four", *FOUR_NODES)
    planned = json.loads(deployed_cluster.cli("plan", four, "--json").stdout)
    assert {"node add"} <= {change["impact"] for change in planned["changes"]}
    applied = deployed_cluster.cli("deploy", four)
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr[-2000:]
    assert settled_nodes({**nodes(), "node4": ("idle", "none")})["node4"] == ("idle", "none")
    assert job_state(job) == "RUNNING"
    run(["scancel", job])


def test_removing_a_node_drains_it_and_waits_for_its_job(deployed_cluster: DeployedCluster, tmp_path: Path) -> None:
    without = inventory_with(deployed_cluster, tmp_path, "without-node3", *WITHOUT_NODE3)
    job = submit("node3", 25)
    refused = deployed_cluster.cli("deploy", without)
    assert refused.returncode == 3, refused.stdout[-3000:] + refused.stderr[-2000:]
    assert "job " + job in refused.stderr
    state, reason = nodes()["node3"]
    assert state in ("draining", "drained", "mixed") and reason.startswith("cluster-cli:"), (state, reason)
    assert job_state(job) == "RUNNING"
    applied = deployed_cluster.cli("deploy", without, "--wait", "120")
    assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr[-2000:]
    assert "node3" not in nodes()
    assert job_state(job) == "COMPLETED"
    assert not (RUN_DIR / "slurmd-node3.pid").exists() or "slurmd-node3.pid" not in pids()


def test_an_operators_drain_survives_deploy_and_resume_without_force(deployed_cluster: DeployedCluster) -> None:
    inventory = str(deployed_cluster.inventory)
    run(["scontrol", "update", "NodeName=node2", "State=DRAIN", "Reason=bad fan, ticket 4711"])
    try:
        # back to the shipped inventory: node4 goes, node3 comes back, every daemon restarts. On this
        # one-host cluster a deploy with changes runs every task of site.yml (as --full does), the
        # post-check included, which waits for ready nodes: the drain is not a failure.
        applied = deployed_cluster.cli("deploy", inventory)
        assert applied.returncode == 0, applied.stdout[-4000:] + applied.stderr[-2000:]
        assert "Post-deploy checks" in applied.stdout
        assert nodes()["node2"] == ("drained", "bad fan, ticket 4711")
        refused = deployed_cluster.cli("nodes", "resume", inventory, "node2")
        assert refused.returncode == 2 and "--force" in refused.stderr, refused.stderr
        assert nodes()["node2"][0] == "drained"
    finally:
        forced = deployed_cluster.cli("nodes", "resume", inventory, "node2", "--force")
    assert forced.returncode == 0, forced.stderr
    idle = {name: ("idle", "none") for name in ("node1", "node2", "node3")}
    assert settled_nodes(idle) == idle


def test_nodes_drain_and_resume_round_trip(deployed_cluster: DeployedCluster) -> None:
    inventory = str(deployed_cluster.inventory)
    drained = deployed_cluster.cli("nodes", "drain", inventory, "node[1-2]", "--reason", "maintenance")
    assert drained.returncode == 0, drained.stderr
    listed = json.loads(deployed_cluster.cli("nodes", "list", inventory, "--json").stdout)
    by_name = {node["name"]: node for node in listed}
    assert by_name["node1"]["reason"] == "cluster-cli: maintenance" and by_name["node1"]["set_by"] == "root"
    resumed = deployed_cluster.cli("nodes", "resume", inventory, "node[1-2]")
    assert resumed.returncode == 0, resumed.stderr
    idle = {name: ("idle", "none") for name in ("node1", "node2", "node3")}
    assert settled_nodes(idle) == idle
    unknown = deployed_cluster.cli("nodes", "drain", inventory, "node9", "--reason", "x")
    assert unknown.returncode == 2 and "no such node: node9" in unknown.stderr


@pytest.mark.parametrize("verb", ["plan", "deploy"])
def test_a_host_holding_another_clusters_state_is_refused_before_anything_changes(
    deployed_cluster: DeployedCluster, tmp_path: Path, verb: str
) -> None:
    other = inventory_with(deployed_cluster, tmp_path, "other", ("cluster_name: local", "cluster_name: other"))
    before = pids()
    done = deployed_cluster.cli(verb, other)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert "holds the state of cluster 'local'" in done.stdout + done.stderr
    assert "PLAY" not in done.stdout and pids() == before


HETERO = Path(__file__).resolve().parents[2] / "inventories" / "examples" / "hetero-local.yaml"
# What a verb of another cluster's inventory may not do to this one: each must refuse (exit 1),
# naming this machine and the cluster found here, before it drains, requeues, stops or writes.
FOREIGN_VERBS = (
    ("plan",), ("deploy",), ("deploy", "--force"), ("deploy", "--full"), ("teardown",),
    ("teardown", "--purge", "--yes", "hetero"), ("nodes", "drain", "h100-1", "--reason", "x"),
    ("nodes", "resume", "h100-1"), ("health",), ("upgrade", "--to", "24.11.5-4", "--yes", "hetero"),
)


def test_another_clusters_inventory_changes_nothing_of_this_one(deployed_cluster: DeployedCluster, tmp_path: Path) -> None:
    """Issue 31 item 0, as a user tried it: with a job running on node1, the heterogeneous example
    (cluster 'hetero', its own StateSaveLocation, its own secrets from another state home) aimed at
    this machine. Before the check, its deploy drained node1-node3 'removed from the inventory'."""
    text = HETERO.read_text().replace("slurm:\n  conf:", "slurm:\n  paths:\n    state_dir: /var/lib/slurm/hetero-ctld\n  conf:")
    assert "hetero-ctld" in text
    other = tmp_path / "hetero.yaml"
    other.write_text(text)
    job = submit("node1", 600)
    before_nodes, before_pids = nodes(), pids()
    try:
        for verb in FOREIGN_VERBS:
            argv = [*verb[:2], str(other), *verb[2:]] if verb[0] == "nodes" else [verb[0], str(other), *verb[1:]]
            done = run_cli(tmp_path / "hetero-home", *argv, timeout=300)
            output = done.stdout + done.stderr
            assert done.returncode == 1, f"{verb}: exit {done.returncode}\n{output[-3000:]}"
            assert "localhost" in output and "cluster 'local'" in output and "not 'hetero'" in output, output[-3000:]
            assert "PLAY" not in done.stdout, f"{verb} ran a playbook"
            assert job_state(job) == "RUNNING" and nodes() == before_nodes and pids() == before_pids, verb
    finally:
        run(["scancel", job])
    assert not Path("/var/lib/slurm/hetero-ctld").exists()
