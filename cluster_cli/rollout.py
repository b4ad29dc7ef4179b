"""What a deploy's rollout did to each host, from the runner's record of the playbook's events.

The compute play of site.yml goes in waves (``deploy --batch``): Ansible stops the whole run when
more than ``max_fail_percentage`` of a wave's hosts failed, or when every host of a wave (or of
any play) failed; the plays after it then run on no host. A host is deployed only when the run got
to its last play and the host failed nowhere; the others are listed with where they stopped.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from cluster_cli.ansible.runner import PlaybookResult, TaskFailure

COMPUTE_PLAY = "Compute nodes"  # site.yml's play in waves


@dataclass(frozen=True)
class Outcome:
    hosts: list[str]  # the cluster's hosts the run was for
    compute: list[str]  # the compute hosts among them
    failures: list[TaskFailure]  # the failure that stopped each host, in the order they came
    finished: bool  # the run got to its last play
    stopped_in: str | None  # the play during which Ansible stopped the run, when it said so
    cut_off: list[str]  # hosts of the wave Ansible stopped in that had not failed themselves
    in_compute_play: set[str]  # hosts that had a task result in the compute play

    @property
    def failed_hosts(self) -> set[str]:
        return {failure.host for failure in self.failures}

    @property
    def unreachable(self) -> list[str]:
        return [failure.host for failure in self.failures if failure.unreachable]

    @property
    def deployed(self) -> list[str]:
        """Hosts that went through every play without a failure (none when the run stopped early)."""
        if not self.finished:
            return []
        return [host for host in self.hosts if host not in self.failed_hosts]


def stopping_failures(result: PlaybookResult) -> list[TaskFailure]:
    """The failure that stopped each host (its last: a rescue's own failure comes after the one it
    rescued), one per host, in the order the hosts first failed."""
    last: dict[str, TaskFailure] = {}
    for failure in result.failures:
        last[failure.host] = failure
    return list(last.values())


def outcome(result: PlaybookResult, known: Collection[str], compute: Collection[str], last_play: str) -> Outcome:
    """The outcome for the hosts in ``known`` (the inventory's, and those that left it) that the run
    touched; ``last_play`` is the playbook's last play."""
    failures = stopping_failures(result)
    failed = {failure.host for failure in failures}
    touched = set(result.recap) | failed | set().union(*result.reached.values())
    hosts = sorted(host for host in touched if host in known)
    return Outcome(
        hosts=hosts,
        compute=[host for host in hosts if host in compute],
        failures=failures,
        finished=bool(result.plays) and result.plays[-1] == last_play,
        stopped_in=result.stopped_in,
        cut_off=sorted(result.cut_off - failed),
        in_compute_play=result.reached.get(COMPUTE_PLAY, set()),
    )


def count_lines(found: Outcome) -> list[str]:
    """The counts: every host, then the compute hosts ("N of M compute hosts deployed")."""
    by_host = {failure.host: failure for failure in found.failures}
    unreachable = sum(host in by_host and by_host[host].unreachable for host in found.hosts)
    failed = sum(host in by_host for host in found.hosts) - unreachable
    ok = len(found.hosts) - failed - unreachable
    deployed = [host for host in found.deployed if host in found.compute]
    lines = [f"hosts: {ok} ok, {failed} failed, {unreachable} unreachable, of {len(found.hosts)}",
             f"{len(deployed)} of {len(found.compute)} compute hosts deployed"]
    if not found.finished:
        lines.append(_stop_line(found))
    return lines


def _stop_line(found: Outcome) -> str:
    where = f' in play "{found.stopped_in}"' if found.stopped_in else ""
    stopped = found.failed_hosts | set(found.cut_off)
    through = [host for host in found.compute if host in found.in_compute_play and host not in stopped]
    parts = [f"{len(through)} through the compute play"]
    if found.cut_off:
        parts.append(f"{len(found.cut_off)} stopped with their wave ({', '.join(found.cut_off)})")
    not_reached = [host for host in found.compute if host not in found.in_compute_play and host not in stopped]
    parts.append(f"{len(not_reached)} not reached")
    return f"the deploy stopped{where} before its last play, so no host counts as deployed: {', '.join(parts)}"
