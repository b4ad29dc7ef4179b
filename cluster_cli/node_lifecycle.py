"""Node lifecycle on a running cluster: list, drain, resume, and the waits a removal needs.

Commands run on the primary controller (here when its connection is local, else over SSH),
as `scontrol`/`sinfo`/`squeue` with the cluster's SLURM_CONF. A drain cluster-cli sets carries
the reason prefix ``cluster-cli:`` (the node health check's, ``cluster-cli health:``); any other
drain is an operator's, and nothing here lifts it without ``force``.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

from cluster_cli.cluster import Cluster
from cluster_cli.errors import ClusterCliError, RefusedError
from cluster_cli.hostlist import compress, expand
from cluster_cli.render.health_conf import HEALTH_REASON_PREFIX
from cluster_cli.node_states import is_resumable
from cluster_cli.ssh import ssh_argv

REASON_PREFIX = "cluster-cli:"
COMMAND_TIMEOUT_S = 30


class NodeCommandError(ClusterCliError):
    """A Slurm command on the controller failed."""


class ForeignDrainError(RefusedError):
    """A node holds a drain cluster-cli did not set."""


@dataclass(frozen=True)
class NodeInfo:
    name: str
    state: str
    reason: str
    set_by: str
    since: str

    @property
    def drained_by_cluster_cli(self) -> bool:
        """`nodes drain`'s reason, or the health check's (which the check itself lifts once the
        node passes: `nodes resume` may lift it sooner)."""
        return self.reason.startswith((REASON_PREFIX, HEALTH_REASON_PREFIX))

    @property
    def resumable(self) -> bool:
        return is_resumable(self.state)


def controller_command(cluster: Cluster, argv: list[str], timeout_s: float = COMMAND_TIMEOUT_S) -> str:
    """Run ``argv`` on the primary controller; its output, or NodeCommandError with Slurm's message."""
    host = cluster.hosts[cluster.inventory.controllers.primary]
    conf = f"{cluster.inventory.slurm.paths.conf_dir}/slurm.conf"
    if host.connection == "local":
        command, env = argv, dict(os.environ, SLURM_CONF=conf)
    else:
        command, env = ssh_argv(host, ["env", f"SLURM_CONF={conf}", *argv]), None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise NodeCommandError(f"{argv[0]} on {host.name}: no answer in {timeout_s:.0f} s") from None
    except FileNotFoundError:
        raise NodeCommandError(f"{command[0]}: not installed on this machine") from None
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip() or f"exit {done.returncode}"
        raise NodeCommandError(f"{' '.join(argv[:3])} on {host.name}: {message}")
    return done.stdout


def list_nodes(cluster: Cluster) -> list[NodeInfo]:
    output = controller_command(cluster, ["sinfo", "--all", "--noheader", "--Node", "--format=%N|%T|%u|%H|%E"])
    nodes: dict[str, NodeInfo] = {}
    for line in output.splitlines():
        parts = line.split("|", 4)
        if len(parts) == 5:
            name, state, user, since, reason = parts
            nodes.setdefault(name, NodeInfo(name, state, "" if reason == "none" else reason,
                                            "" if user == "Unknown" else user, "" if since == "Unknown" else since))
    return list(nodes.values())


def select(cluster: Cluster, expression: str) -> list[str]:
    """The inventory's or Slurm's nodes a hostlist expression names; unknown names are refused."""
    names = expand(expression)
    known = {node.name for node in cluster.nodes} | {node.name for node in list_nodes(cluster)}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise RefusedError(f"no such node: {', '.join(unknown)}")
    return names


def drain(cluster: Cluster, names: list[str], reason: str) -> str:
    """Drain ``names``; the reason as stored (with the cluster-cli prefix)."""
    text = f"{REASON_PREFIX} {reason.strip()}"
    controller_command(cluster, ["scontrol", "update", f"NodeName={compress(names)}", "State=DRAIN", f"Reason={text}"])
    return text


def resume(cluster: Cluster, names: list[str], force: bool = False) -> list[str]:
    """Resume the drained or down nodes among ``names``; the ones resumed. An operator's drain
    (a reason without the cluster-cli prefix) is refused unless ``force``."""
    nodes = {node.name: node for node in list_nodes(cluster) if node.name in names}
    foreign = [node for node in nodes.values() if node.reason and not node.drained_by_cluster_cli]
    if foreign and not force:
        held = "; ".join(f"{node.name} ({node.reason!r}, set by {node.set_by or 'unknown'} {node.since})".strip()
                         for node in foreign)
        raise ForeignDrainError(f"not resuming nodes drained by someone else: {held}. "
                                f"Resume them with --force if that is intended.")
    todo = [name for name in names if name in nodes and nodes[name].resumable]
    if todo:
        controller_command(cluster, ["scontrol", "update", f"NodeName={compress(todo)}", "State=RESUME"])
    return todo


def running_jobs(cluster: Cluster, names: list[str]) -> dict[str, list[str]]:
    """Job ids still running (or completing) on each of ``names``."""
    output = controller_command(cluster, ["squeue", "--all", "--noheader", "--states=RUNNING,COMPLETING,SUSPENDED",
                                          "--format=%i|%N"])
    jobs: dict[str, list[str]] = {name: [] for name in names}
    for line in output.splitlines():
        job, _, nodelist = line.partition("|")
        for node in expand(nodelist) if nodelist else []:
            if node in jobs:
                jobs[node].append(job)
    return jobs


def requeue(cluster: Cluster, job_ids: list[str]) -> None:
    if job_ids:
        controller_command(cluster, ["scontrol", "requeue", ",".join(sorted(set(job_ids)))])


def wait_for_no_jobs(cluster: Cluster, names: list[str], timeout_s: float, poll_s: float = 2.0) -> dict[str, list[str]]:
    """Wait until no job runs on ``names``; the jobs still running when ``timeout_s`` ran out."""
    deadline = time.monotonic() + timeout_s
    while True:
        busy = {node: jobs for node, jobs in running_jobs(cluster, names).items() if jobs}
        if not busy or time.monotonic() >= deadline:
            return busy
        time.sleep(poll_s)
