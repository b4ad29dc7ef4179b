"""Issue 34's figure: what the training environment costs each host of a first install, installed
once on shared storage against installed on every host.

Run the default test-bed scenario twice, each with its own event log (cluster_cli_events appends
every deploy of the run to it; the first is the first install), one after the other on a quiet
machine:

    CLUSTER_TB_STORAGE=1 CLUSTER_CLI_EVENTS_LOG=/tmp/ev-shared.jsonl \\
        .venv/bin/python -m pytest tests/testbed/test_molecule.py -k default -p no:cacheprovider
    CLUSTER_CLI_EVENTS_LOG=/tmp/ev-local.jsonl \\
        .venv/bin/python -m pytest tests/testbed/test_molecule.py -k default -p no:cacheprovider
    .venv/bin/python benchmarks/shared_venv_deploy.py --shared /tmp/ev-shared.jsonl --local /tmp/ev-local.jsonl

A host's time is the sum of its tasks' times (task_profile.aggregate: from each task's start to
its result), per play; "environment" is the two training-environment plays (the install, and on
shared storage each host's check of what the first host installed), "rest" every other play of
the same deploy. With CLUSTER_TB_STORAGE=1, login, c1 and c2 share the environment on one sshfs
mount (molecule/shared/tasks/storage.yml), and the first of them installs it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from task_profile import aggregate, read_events

FIRST_PLAY = "Preflight on the control node"
ENVIRONMENT_PLAYS = ("Training environment", "Shared training environment")
HOSTS = ("login", "c1", "c2")


def first_deploy(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of the log's first deploy: up to the second run of the first play."""
    starts = [index for index, event in enumerate(events) if event.get("event") == "play" and event.get("name") == FIRST_PLAY]
    if not starts:
        raise SystemExit("no deploy in the event log")
    return events[starts[0]:starts[1]] if len(starts) > 1 else events[starts[0]:]


def host_seconds(events: list[dict[str, Any]], host: str) -> tuple[float, float]:
    """``host``'s seconds in the environment's plays and in the rest of the deploy."""
    profile = aggregate(events, lambda name: name == host)
    environment = sum(seconds for play, seconds in profile.plays.items() if play in ENVIRONMENT_PLAYS)
    return environment, profile.compute_seconds - environment


def play_walls(events: list[dict[str, Any]]) -> dict[str, float]:
    """Wall seconds of each environment play: from its play event to the next play's."""
    plays = [event for event in events if event.get("event") == "play"]
    walls: dict[str, float] = {}
    for play, following in zip(plays, plays[1:] + [events[-1]]):
        if play["name"] in ENVIRONMENT_PLAYS:
            walls[play["name"]] = float(following["t"]) - float(play["t"])
    return walls


def table(logs: dict[str, Path], hosts: tuple[str, ...]) -> str:
    lines = ["| environment | host | environment plays (host-s) | rest of the deploy (host-s) | with / without the environment |",
             "|---|---|---|---|---|"]
    walls = []
    for label, path in logs.items():
        events = first_deploy(read_events(path))
        for host in hosts:
            environment, rest = host_seconds(events, host)
            ratio = (environment + rest) / rest if rest else float("nan")
            lines.append(f"| {label} | {host} | {environment:.1f} | {rest:.1f} | {ratio:.3f} |")
        walls.append(f"{label}: " + ", ".join(f"{play} {seconds:.1f} s" for play, seconds in play_walls(events).items()))
    return "\n".join(lines + ["", "Wall time of the environment's plays: " + "; ".join(walls) + "."])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, required=True, help="event log of the bed run with CLUSTER_TB_STORAGE=1")
    parser.add_argument("--local", type=Path, help="event log of the bed run without it (each host installs)")
    parser.add_argument("--hosts", nargs="+", default=list(HOSTS))
    options = parser.parse_args()
    logs = {"shared": options.shared, **({"per host": options.local} if options.local else {})}
    print(table(logs, tuple(options.hosts)))


if __name__ == "__main__":
    main()
