"""Daemons are started, stopped and restarted in one place: roles/daemon (issue 31, item 1).

Every task file of roles/ and playbooks/ outside roles/daemon is walked (blocks, rescue, always, the
plays' task lists and handlers); a task that manages a service itself (ansible.builtin.service,
systemd_service, systemd; a systemd_service that only reloads the unit files is not one), or runs a
daemon binary, start-stop-daemon, `systemctl start|stop|...` or kill on one by hand, fails the test
naming the file and the task. The roles' variables are read too: an argv kept there (the roles once
kept their start-stop-daemon command lines in vars/main.yml) counts the same.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PIECE = REPO / "roles" / "daemon"
SERVICE_MODULES = {f"{prefix}{name}" for prefix in ("", "ansible.builtin.", "ansible.legacy.")
                   for name in ("service", "systemd", "systemd_service")}
COMMAND_MODULES = {f"{prefix}{name}" for prefix in ("", "ansible.builtin.", "ansible.legacy.")
                   for name in ("command", "shell", "raw")}
# The daemons of this repository's roles and the ones the next roles bring.
DAEMONS = {"munged", "slurmctld", "slurmd", "slurmdbd", "slurmrestd", "mariadbd", "mysqld", "mysqld_safe",
           "nvidia-persistenced", "nv-fabricmanager", "nv-hostengine", "rpc.nfsd", "rpc.mountd", "prometheus",
           "node_exporter"}
# What runs the word after it as a program (an environment assignment does too).
LAUNCHERS = {"exec", "nohup", "sudo", "env", "--exec", "setsid", "daemon"}
SYSTEMCTL_VERBS = {"start", "stop", "restart", "reload", "try-restart", "reload-or-restart", "enable", "disable",
                   "mask", "unmask", "kill"}
SECTIONS = ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always")


def tasks_in(items: Any) -> Iterator[dict[str, Any]]:
    """Every task of a task list or play list, nested blocks and plays' sections included."""
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        nested = [section for section in SECTIONS if isinstance(item.get(section), list)]
        if "hosts" not in item and "block" not in item:
            yield item
        for section in nested:
            yield from tasks_in(item[section])


def _words(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(word) for word in value]
    try:
        return shlex.split(str(value), comments=True)
    except ValueError:
        return str(value).split()


def _command_words(task: dict[str, Any], module: str) -> list[str]:
    args = task[module]
    if isinstance(args, dict):
        return _words(args.get("argv") or args.get("cmd") or args.get("_raw_params") or "")
    return _words(args)


def manages_a_daemon(words: list[str], binaries: bool = True) -> str | None:
    """Why this command line starts, stops or signals a daemon, or None. ``binaries``: a daemon's
    binary run as the program counts too (a variable may name the binary without running it)."""
    names = [Path(word).name for word in words]
    for position, name in enumerate(names):
        if binaries and name in DAEMONS and (position == 0 or names[position - 1] in LAUNCHERS or "=" in words[position - 1]):
            return f"runs {name}"
        if name == "start-stop-daemon":
            return "runs start-stop-daemon"
        if name == "systemctl" and set(names[position + 1:]) & SYSTEMCTL_VERBS:
            return "runs systemctl " + " ".join(names[position + 1:position + 3])
        if name == "service" and set(names[position + 1:]) & {"start", "stop", "restart", "reload"}:
            return "runs service"
        if name in {"kill", "pkill", "killall"} and set(names[position + 1:]) & DAEMONS:
            return f"runs {name} on a daemon"
    return None


def violation(task: dict[str, Any]) -> str | None:
    """What in ``task`` starts, stops or restarts a daemon outside roles/daemon, or None."""
    for module, value in task.items():
        if module in SERVICE_MODULES:
            args = value if isinstance(value, dict) else {}
            if set(args) - {"daemon_reload", "daemon_reexec"}:
                return f"uses {module}"
        if module in COMMAND_MODULES:
            reason = manages_a_daemon(_command_words(task, module))
            if reason:
                return reason
    return None


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def task_files() -> list[Path]:
    files = sorted(REPO.glob("playbooks/**/*.yml")) + sorted(REPO.glob("roles/*/tasks/*.yml"))
    files += sorted(REPO.glob("roles/*/handlers/*.yml"))
    return [path for path in files if PIECE not in path.parents]


def var_files() -> list[Path]:
    files = sorted(REPO.glob("roles/*/vars/*.yml")) + sorted(REPO.glob("roles/*/defaults/*.yml"))
    return [path for path in files if PIECE not in path.parents]


def _strings(value: Any) -> Iterator[Any]:
    """Every list of strings and every string in a variable's value."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        if all(isinstance(item, str) for item in value):
            yield value
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_no_task_outside_roles_daemon_starts_stops_or_restarts_a_daemon() -> None:
    found = []
    for path in task_files():
        for task in tasks_in(_load(path)):
            reason = violation(task)
            if reason:
                found.append(f"{path.relative_to(REPO)}: {task.get('name')!r} {reason}")
    assert not found, "start, stop and restart daemons through roles/daemon (include_role tasks_from):\n" + "\n".join(found)


def test_no_role_variable_holds_a_daemons_command_line() -> None:
    found = []
    for path in var_files():
        for name, value in (_load(path) or {}).items():
            for strings in _strings(value):
                words = strings if isinstance(strings, list) else re.split(r"[\s\[\],'\"]+", strings)
                reason = manages_a_daemon([word for word in words if word], binaries=False)
                if reason:
                    found.append(f"{path.relative_to(REPO)}: {name} {reason}")
    assert not found, "keep daemons' command lines in roles/daemon:\n" + "\n".join(found)


@pytest.mark.parametrize(("task", "reason"), [
    ({"ansible.builtin.systemd_service": {"name": "munge", "state": "restarted"}}, "uses ansible.builtin.systemd_service"),
    ({"service": {"name": "slurmd", "state": "started"}}, "uses service"),
    ({"ansible.builtin.systemd": {"name": "x", "enabled": False}}, "uses ansible.builtin.systemd"),
    ({"ansible.builtin.command": {"argv": ["start-stop-daemon", "--start", "--exec", "/usr/sbin/munged"]}},
     "runs start-stop-daemon"),
    ({"ansible.builtin.command": {"argv": ["/usr/sbin/slurmd", "-D", "-N", "n1"]}}, "runs slurmd"),
    ({"ansible.builtin.shell": {"cmd": "nohup /usr/sbin/slurmctld -D &"}}, "runs slurmctld"),
    ({"ansible.builtin.shell": "systemctl restart slurmdbd"}, "runs systemctl restart slurmdbd"),
    ({"ansible.builtin.command": {"argv": ["pkill", "-x", "munged"]}}, "runs pkill on a daemon"),
    ({"ansible.builtin.command": {"argv": ["env", "SLURM_CONF=/x", "/usr/sbin/slurmd", "-D"]}}, "runs slurmd"),
])
def test_each_way_of_managing_a_daemon_by_hand_is_caught(task: dict[str, Any], reason: str) -> None:
    assert violation({"name": "by hand", **task}) == reason


@pytest.mark.parametrize("task", [
    {"ansible.builtin.systemd_service": {"daemon_reload": True}},  # the unit files, not a daemon
    {"ansible.builtin.command": {"argv": ["systemctl", "show", "--property=MainPID", "--value", "slurmctld"]}},
    {"ansible.builtin.command": {"argv": ["systemctl", "is-active", "slurmdbd"]}},
    {"ansible.builtin.command": {"argv": ["scontrol", "reconfigure"]}},
    {"ansible.builtin.command": {"argv": ["sacctmgr", "show", "cluster", "slurmd"]}},  # a word, not the binary run
    {"ansible.builtin.import_role": {"name": "daemon", "tasks_from": "start"}},
])
def test_reading_a_daemons_state_or_including_the_piece_is_not_caught(task: dict[str, Any]) -> None:
    assert violation(task) is None


def test_nested_tasks_and_plays_are_walked() -> None:
    inner = {"name": "inner", "ansible.builtin.service": {"name": "x", "state": "stopped"}}
    plays = [{"hosts": "all", "tasks": [{"block": [{"name": "a"}], "rescue": [{"block": [inner]}]}],
              "handlers": [{"name": "h"}]}]
    assert [task["name"] for task in tasks_in(plays)] == ["a", "inner", "h"]


def test_the_daemon_roles_use_the_piece() -> None:
    """Each role that runs a daemon includes roles/daemon (the walk above would pass a role that
    silently stopped starting its daemon)."""
    for role in ("munge", "slurmdbd", "slurmctld", "slurmd", "nvidia"):
        calls = [task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role")
                 for path in sorted((REPO / "roles" / role).glob("*/*.yml")) if path.parent.name in ("tasks", "handlers")
                 for task in tasks_in(_load(path))]
        entries = {call["tasks_from"] for call in calls if call and call.get("name") == "daemon"}
        assert "start" in entries, f"roles/{role} starts no daemon through roles/daemon: {sorted(entries)}"
