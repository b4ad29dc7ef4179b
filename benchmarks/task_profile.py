"""Per-task profile of a deploy from cluster_cli_events' event log (CLUSTER_CLI_EVENTS_LOG).

Each host's task runs from its ``start`` event to its result (ok, failed, skipped, unreachable);
a host runs one task at a time, so a result closes its host's last start (the start event names
the task with its role, ``role : task``, the result without).
those host-seconds are summed per play and per (play, task), apart for compute hosts and the
others. A host's time is the time its worker took, waiting for the control node's CPU included:
on a loaded control node that wait is part of what a host costs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS = frozenset({"ok", "failed", "skipped", "unreachable"})


@dataclass
class TaskCost:
    play: str
    task: str
    host_seconds: float = 0.0
    runs: int = 0  # host-task results counted
    changed: int = 0
    skipped: int = 0


@dataclass
class Profile:
    plays: dict[str, float] = field(default_factory=dict)  # play -> compute host-seconds
    tasks: dict[tuple[str, str], TaskCost] = field(default_factory=dict)  # compute hosts only
    other_seconds: float = 0.0  # host-seconds of the hosts that are not compute hosts
    compute_hosts: set[str] = field(default_factory=set)

    @property
    def compute_seconds(self) -> float:
        return sum(self.plays.values())

    def per_compute_host(self) -> float:
        return self.compute_seconds / len(self.compute_hosts) if self.compute_hosts else 0.0

    def top(self, count: int) -> list[TaskCost]:
        return sorted(self.tasks.values(), key=lambda cost: cost.host_seconds, reverse=True)[:count]


def read_events(path: Path) -> list[dict[str, Any]]:
    """The event log's objects; a torn last line (a killed run) is left out."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def aggregate(events: Iterable[dict[str, Any]], is_compute: Callable[[str], bool]) -> Profile:
    """Sum each host's task time per play and per task; results without a start are not timed."""
    profile = Profile()
    play = ""
    started: dict[str, float] = {}
    for event in events:
        kind = event.get("event")
        if kind == "play":
            play = str(event.get("name", ""))
        elif kind == "start":
            started[event["host"]] = float(event["t"])
        elif kind in RESULTS:
            begun = started.pop(event["host"], None)
            if begun is not None:
                _add(profile, play, event, float(event["t"]) - begun, is_compute)
    return profile


def _add(profile: Profile, play: str, event: dict[str, Any], seconds: float,
         is_compute: Callable[[str], bool]) -> None:
    host = str(event["host"])
    if not is_compute(host):
        profile.other_seconds += seconds
        return
    profile.compute_hosts.add(host)
    profile.plays[play] = profile.plays.get(play, 0.0) + seconds
    cost = profile.tasks.setdefault((play, str(event["task"])), TaskCost(play, str(event["task"])))
    cost.host_seconds += seconds
    cost.runs += 1
    cost.changed += bool(event.get("changed"))
    cost.skipped += event.get("event") == "skipped"

