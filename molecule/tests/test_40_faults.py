"""Faults on real daemons: each test breaks something, asserts the cluster's answer, and leaves
the cluster as it found it (every node idle) for the next one.

The scenario's inventory shortens SlurmdTimeout and the requeue hold (AuthInfo cred_expire) so
the faults play out in seconds; the protections themselves are the project's defaults:
KillOnBadExit=1, ReturnToService=1, slurmd units enabled at boot, the roles' file modes.
"""

from __future__ import annotations

import subprocess
import time

import pytest
from conftest import IDLE_AFTER_JOBS_S, ClusterView

from cluster_cli.alert_windows import window as window_of
from cluster_cli.smoke.checks_training import REQUEUE_SETTLE_S, REQUEUE_START


def _down(state: str) -> bool:
    # DOWN itself ("down", "down*"): a node only "not responding" ("idle*", "mixed*") is not out of
    # service yet, and if it answers again before SlurmdTimeout, ReturnToService plays no part.
    return state.startswith("down")


@pytest.fixture(autouse=True)
def healthy_cluster(view: ClusterView) -> None:
    view.wait_nodes_idle(timeout=120)


def _slurmd_unit(view: ClusterView, node: str) -> tuple[str, str]:
    """(host, unit) running the slurmd of ``node``."""
    for name, host in view.cluster.hosts.items():
        if any(instance.name == node for instance in host.slurmd_nodes):
            return name, f"slurmd@{node}"
    raise AssertionError(f"no host runs node {node}")


def test_killed_slurmd_takes_its_node_out_and_a_requeue_job_finishes_elsewhere(view: ClusterView) -> None:
    assert len(view.nodes) >= 2, "needs two compute nodes"
    timeout = int(view.config()["SlurmdTimeout"].split()[0])
    script = 'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 2; else sleep 601; fi'
    job = view.slurm(f"sbatch --parsable --requeue -N1 -o /dev/null --wrap '{script}'")
    view.wait_until(f"job {job} runs", lambda: view.job(job)["JobState"] == "RUNNING", timeout=60, every=1)
    victim = view.job(job)["NodeList"]
    host, unit = _slurmd_unit(view, victim)
    try:
        # slurmd and the job's processes die, as when the node fails. (`systemctl kill` can fail
        # on a cgroup with job steps inside a container, and a unit whose cgroup still holds
        # them does not start again there.)
        view.run(host, f"kill -KILL $(systemctl show --property=MainPID --value {unit}); "
                       f"pkill -KILL -f 'slurmstepd: \\[{job}\\.'; pkill -KILL -f '^sleep 601$'; true")
        took = view.wait_until(f"{victim} leaves service", lambda: _down(view.node_state(victim)[0]),
                               timeout=timeout * 2 + 30)
        print(f"{victim} marked down {took:.0f} s after its slurmd was killed (SlurmdTimeout={timeout})")
        _node_down_alert_fires(view, took)
        view.wait_until(f"job {job} completes after its requeue",
                        lambda: _expedited(view, job)["JobState"] == "COMPLETED", timeout=240)
        final = view.job(job)
        assert int(final["Restarts"]) >= 1 and final["NodeList"] != victim, final
    finally:
        view.run(host, f"systemctl start {unit}")
    view.wait_nodes_idle(timeout=120)  # ReturnToService=1: back once it registers


def _expedited(view: ClusterView, job: str) -> dict[str, str]:
    """The job's fields; a requeued job that Slurm holds for its credentials' lifetime (BeginTime,
    `cred_expire`: 30 s on the bed) is let start now, as root and as the smoke suite's preempt
    check does (REQUEUE_SETTLE_S, REQUEUE_START). The hold is Slurm's, not what this test is about."""
    found = view.job(job)
    if found.get("JobState") == "PENDING" and found.get("Reason") == "BeginTime":
        time.sleep(REQUEUE_SETTLE_S)
        view.slurm(f"scontrol update JobId={job} StartTime={REQUEUE_START}")
    return found


def _node_down_alert_fires(view: ClusterView, down_after: float) -> None:
    """Where the scenario has a monitoring host: SlurmNodesDown fires within its `for` window, one
    scrape (the exporter sees the node down) and one rule evaluation of the node's going down."""
    monitoring = view.cluster.inventory.monitoring
    if monitoring.host is None:
        return
    window = _seconds(window_of("SlurmNodesDown", monitoring.alert_for))
    allowed = window + 2 * monitoring.scrape_interval_s + 5
    took = view.wait_until("Prometheus fires SlurmNodesDown", lambda: bool(view.firing("SlurmNodesDown")),
                           timeout=allowed, every=2)
    print(f"FIGURE SlurmNodesDown fired {took:.0f} s after the node was marked down, {down_after + took:.0f} s "
          f"after its slurmd was killed (for {window} s, scrape interval {monitoring.scrape_interval_s} s)")


def _seconds(duration: str) -> int:
    """A Prometheus duration of seconds or minutes (``10s``, ``5m``) in seconds."""
    return int(duration[:-1]) * {"s": 1, "m": 60}[duration[-1]]


def test_slurmctld_restart_keeps_running_and_pending_jobs(view: ClusterView) -> None:
    every = len(view.nodes)
    running = view.slurm(f"sbatch --parsable -N{every} -o /dev/null --wrap 'sleep 25'")
    view.wait_until(f"job {running} runs", lambda: view.job(running)["JobState"] == "RUNNING", timeout=60, every=1)
    pending = view.slurm(f"sbatch --parsable -N{every} -o /dev/null --wrap 'true'")
    before = view.job(running)
    assert view.job(pending)["JobState"] == "PENDING"
    view.run(view.controller, "systemctl restart slurmctld")
    view.wait_until("slurmctld answers again", lambda: view.run(view.submit, "scontrol ping", check=False).rc == 0, timeout=60)
    after = view.job(running)
    assert (after["JobState"], after["StartTime"], after["NodeList"]) == (
        "RUNNING", before["StartTime"], before["NodeList"]), after
    assert view.job(pending)["JobState"] == "PENDING"
    for job in (running, pending):
        view.wait_until(f"job {job} completes", lambda job=job: view.job(job)["JobState"] == "COMPLETED", timeout=120)
    # Every node idle again by itself within IDLE_AFTER_JOBS_S of the last job's end: no second
    # restart. (The "mixed" nodes once seen here were a stale one-node answer of slurmctld, not
    # capacity held: conftest's node_states, docs/operations.md "Nodes allocated with no job".)
    took = view.assert_nodes_idle_after([running, pending])
    print(f"nodes idle {took:.0f} s after the recovered jobs completed (allowed: {IDLE_AFTER_JOBS_S} s)")
    # and free in the scheduler's own books: a job that takes every CPU and all the memory of every node runs
    whole = view.slurm(f"sbatch --parsable -N{every} --exclusive --mem=0 -o /dev/null --wrap true")
    view.wait_until(f"whole-node job {whole} completes", lambda: view.job(whole)["JobState"] == "COMPLETED", timeout=60)


def test_rebooted_compute_host_returns_to_service(view: ClusterView) -> None:
    config = view.config()
    host = view.compute[-1]
    nodes = [node.name for node in view.cluster.hosts[host].slurmd_nodes]
    timeout = int(config["SlurmdTimeout"].split()[0])
    view.bed.stop(host)  # powered off long enough for Slurm to notice, like a crash
    try:
        view.wait_until(f"{nodes} are marked down", lambda: all(_down(view.node_state(n)[0]) for n in nodes),
                        timeout=timeout * 2 + 30)
    finally:
        view.bed.start(host)
    # With ReturnToService=0 they would stay down: the deploy's setting is what brings them back.
    took = view.wait_until(f"{nodes} are idle again (ReturnToService={config['ReturnToService']})",
                           lambda: all(view.node_state(n) == ("idle", "none") for n in nodes), timeout=120)
    print(f"{host} back in service {took:.0f} s after boot")
    out = view.slurm(f"srun -N1 -w {nodes[0]} hostname")
    assert out == host


def test_killed_rank_ends_the_step_within_killwait(view: ClusterView) -> None:
    kill_wait = int(view.config()["KillWait"].split()[0])
    marker = "sleep 3271"  # a command line no other process has
    pattern = f"^(/usr/bin/)?{marker}$"  # srun starts it as /usr/bin/sleep
    ssh = ["ssh", "-F", str(view.bed.run_dir / "ssh_config"), view.submit]
    name = "killed-rank-test"
    with subprocess.Popen([*ssh, f"srun -J {name} -N{len(view.nodes)} --ntasks-per-node=1 {marker}"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as srun:
        try:
            victim = view.compute[-1]
            view.wait_until("every rank runs",
                            lambda: all(view.run(h, f"pgrep -f '{pattern}'", check=False).rc == 0 for h in view.compute),
                            timeout=60, every=1)
            killed = time.monotonic()
            view.run(victim, f"pkill -KILL -f '{pattern}'")
            try:
                output, _ = srun.communicate(timeout=kill_wait + 30)
            except subprocess.TimeoutExpired:
                pytest.fail(f"the step still ran {kill_wait + 30} s after a rank was killed (KillWait={kill_wait})")
            ended = time.monotonic() - killed
        finally:
            if srun.poll() is None:  # the step outlived the kill: end it for the next tests
                srun.kill()
                view.run(view.controller, f"scancel -n {name}", check=False)
    print(f"step ended {ended:.1f} s after a rank was killed (KillWait={kill_wait})")
    assert srun.returncode != 0, output
    assert ended <= kill_wait + 15, f"the step outlived KillWait ({kill_wait} s) by {ended - kill_wait:.0f} s"
    for host in view.compute:
        view.wait_until(f"no rank left on {host}",
                        lambda host=host: view.run(host, f"pgrep -f '{pattern}'", check=False).rc != 0, timeout=30)
