"""Run ansible-playbook (argv list, never a shell) and follow its events.

Ansible's own output goes to a log file; the cluster_cli_events callback streams JSON events
over a pipe, from which this module keeps per-host counts and the failures, and calls a
progress function so the CLI can show what happens live.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_cli.ansible.forks import forks_environment
from cluster_cli.errors import ClusterCliError
from cluster_cli.paths import project_dir

PLUGIN_DIR = Path(__file__).parent / "callback_plugins"
# The project is the Ansible collection cluster_cli.slurm (galaxy.yml), whose roles name its modules
# and plugins by their fully qualified names.
COLLECTION_NAMESPACE, COLLECTION_NAME = "cluster_cli", "slurm"


@contextmanager
def collections_path(project: Path) -> Iterator[Path]:
    """For ANSIBLE_COLLECTIONS_PATH while a playbook runs: a temporary directory whose
    ansible_collections/cluster_cli/slurm is a link to ``project``. The same for a checkout, a copy
    of one and the copy an installed wheel carries (which has no collections/ link, see ansible.cfg),
    and no collection of that name installed elsewhere comes first."""
    with tempfile.TemporaryDirectory(prefix="cluster-cli-collections-") as directory:
        namespace = Path(directory) / "ansible_collections" / COLLECTION_NAMESPACE
        namespace.mkdir(parents=True)
        (namespace / COLLECTION_NAME).symlink_to(project.resolve(), target_is_directory=True)
        yield Path(directory)


@dataclass(frozen=True)
class PlaybookOptions:
    check: bool = False
    diff: bool = False
    limit: str | None = None
    tags: str | None = None
    skip_tags: str | None = None
    verbosity: int = 0


@dataclass
class TaskFailure:
    host: str
    task: str
    role: str | None
    message: str
    unreachable: bool = False
    play: str | None = None


@dataclass
class PlaybookResult:
    returncode: int
    duration_s: float
    log_path: Path
    recap: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[TaskFailure] = field(default_factory=list)
    # hosts a play may miss (ignore_unreachable), each with the first task that could not reach it
    missed: list[TaskFailure] = field(default_factory=list)
    # each play started, in order (a play in waves starts once per wave), and the hosts that had a
    # task result in it: which hosts a rollout reached, and whether the run got to its last play
    plays: list[str] = field(default_factory=list)
    reached: dict[str, set[str]] = field(default_factory=dict)
    # the play in which Ansible stopped the run (max_fail_percentage, or every host of a wave
    # failed), and the hosts of that wave it stopped without a failure of their own
    stopped_in: str | None = None
    cut_off: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.failures

    @property
    def changed(self) -> int:
        return sum(host.get("changed", 0) for host in self.recap.values())


def ansible_tool(name: str) -> str:
    """An Ansible executable: beside this Python first (an unactivated venv), then on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise ClusterCliError(f"{name} is not installed (pip install ansible-core)")
    return found


def playbook_argv(
    playbook: Path, inventories: Sequence[Path], extra_var_files: Sequence[Path], options: PlaybookOptions
) -> list[str]:
    argv = [ansible_tool("ansible-playbook")]
    for inventory in inventories:
        argv += ["-i", str(inventory)]
    for path in extra_var_files:
        argv += ["-e", f"@{path}"]
    if options.check:
        argv.append("--check")
    if options.diff:
        argv.append("--diff")
    if options.limit:
        argv += ["--limit", options.limit]
    if options.tags:
        argv += ["--tags", options.tags]
    if options.skip_tags:
        argv += ["--skip-tags", options.skip_tags]
    if options.verbosity:
        argv.append("-" + "v" * min(options.verbosity, 4))
    argv.append(str(playbook))
    return argv


def run_playbook(
    playbook: Path,
    inventories: Sequence[Path],
    extra_var_files: Sequence[Path],
    log_path: Path,
    options: PlaybookOptions = PlaybookOptions(),
    on_event: Callable[[dict[str, Any]], None] | None = None,
    hosts: int | None = None,
) -> PlaybookResult:
    """Run a playbook to completion; Ansible's output is written to ``log_path`` (0600). ``hosts``:
    how many hosts it works on, to size its forks (cluster_cli.ansible.forks)."""
    project = project_dir()
    argv = playbook_argv(playbook, inventories, extra_var_files, options)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    read_end, write_end = os.pipe()
    environment = dict(os.environ)
    environment.update(
        {
            "ANSIBLE_CONFIG": str(project / "ansible.cfg"),
            "ANSIBLE_CALLBACK_PLUGINS": str(PLUGIN_DIR),
            "ANSIBLE_CALLBACKS_ENABLED": "cluster_cli_events,cluster_cli_warmup",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
            "CLUSTER_CLI_EVENTS_FD": str(write_end),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if hosts is not None:
        environment.update(forks_environment(hosts, environment))
    result = PlaybookResult(returncode=-1, duration_s=0.0, log_path=log_path)
    current: dict[str, str | None] = {}
    wave: set[str] = set()
    started = time.monotonic()
    descriptor = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(descriptor, "a", encoding="utf-8") as log, collections_path(project) as collections:
        environment["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        try:
            process = subprocess.Popen(
                argv,
                cwd=project,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_end,),
            )
        finally:
            os.close(write_end)
        with os.fdopen(read_end, "r", encoding="utf-8") as events:
            for line in events:
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    continue
                _record(result, event, current, wave)
                if on_event is not None:
                    on_event(event)
        result.returncode = process.wait()
    result.duration_s = time.monotonic() - started
    return result


def _record(result: PlaybookResult, event: dict[str, Any], current: dict[str, str | None], wave: set[str]) -> None:
    """Keep what an event says: the play and wave it is in, the hosts reached, failures, the recap."""
    kind = event.get("event")
    if kind == "play":  # once per wave of a play with serial
        play = current["play"] = str(event.get("name", ""))
        if not result.plays or result.plays[-1] != play:
            result.plays.append(play)
        wave.clear()
    elif kind == "stopped":
        result.stopped_in = current.get("play")
        result.cut_off = wave - {failure.host for failure in result.failures}
    elif kind == "task":
        current["role"] = event.get("role")
    elif kind == "stats":
        result.recap = event.get("hosts", {})
    if kind in ("ok", "failed", "unreachable", "skipped"):
        result.reached.setdefault(current.get("play") or "", set()).add(event["host"])
        wave.add(event["host"])
    if kind in ("failed", "unreachable"):
        _record_failure(result, event, current)


def _record_failure(result: PlaybookResult, event: dict[str, Any], current: dict[str, str | None]) -> None:
    unreachable = event["event"] == "unreachable"
    failure = TaskFailure(event["host"], event["task"], current.get("role"), event.get("message", ""),
                          unreachable, current.get("play"))
    if not event.get("ignored"):
        result.failures.append(failure)
    elif unreachable and failure.host not in {missed.host for missed in result.missed}:
        result.missed.append(failure)


def run_ad_hoc(inventory: Path, host: str, argv: Sequence[str], timeout_s: float = 60) -> tuple[int, str]:
    """Run one command on one inventory host through Ansible (command module, no shell).

    Returns the exit code and the command's output, without Ansible's ``host | CHANGED | rc=0 >>``
    header line.
    """
    project = project_dir()
    command = [ansible_tool("ansible"), host, "-i", str(inventory), "-m", "ansible.builtin.command"]
    command += ["-a", json.dumps({"argv": list(argv)})]
    # ANSIBLE_FORCE_COLOR (CI systems and molecule set it) would win over NOCOLOR and wrap the
    # output the callers parse in escape codes.
    environment = dict(os.environ, ANSIBLE_CONFIG=str(project / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                       ANSIBLE_FORCE_COLOR="0")
    try:
        completed = subprocess.run(
            command, cwd=project, env=environment, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:.0f} s"
    output = completed.stdout + completed.stderr
    body = output.split("\n", 1)[1] if "\n" in output else output
    return completed.returncode, body.strip()
