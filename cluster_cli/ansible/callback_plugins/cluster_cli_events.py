"""Ansible callback plugin: one JSON object per line on the file descriptor cluster-cli passes.

cluster-cli reads these events for live per-host progress and the closing summary, while
Ansible's ordinary output goes to the deploy log. Results of `no_log` tasks arrive here already
censored by Ansible; only short messages are forwarded.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: cluster_cli_events
type: notification
short_description: JSON-lines task events for cluster-cli
description:
  - Writes task start/result events and the play recap to the file descriptor in CLUSTER_CLI_EVENTS_FD.
  - Every event carries its wall-clock time (t, seconds since the epoch); with CLUSTER_CLI_EVENTS_LOG set,
    the events (and a start event per host and task) are also appended to that file, for
    benchmarks/deploy_scale.py's per-task profile.
requirements:
  - CLUSTER_CLI_EVENTS_FD set in the environment
"""

MESSAGE_LIMIT = 2000


STDOUT_LINES = 10


def _message(result):
    """msg and stderr of a failed task; only without them, the last lines of its stdout."""
    data = result._result  # the documented way callbacks read results
    parts = [data[key].strip() for key in ("msg", "stderr") if isinstance(data.get(key), str) and data[key].strip()]
    # A retried task that gave up (until/retries) printed what it polled, not why it failed.
    if not parts and not data.get("attempts") and isinstance(data.get("stdout"), str) and data["stdout"].strip():
        parts = data["stdout"].strip().splitlines()[-STDOUT_LINES:]
    if not parts and data.get("results"):
        parts = [str(item.get("msg", "")) for item in data["results"] if isinstance(item, dict) and item.get("failed")]
    if not parts and isinstance(data.get("censored"), str):  # a no_log result, as Ansible censored it
        parts = [data["censored"]]
    if data.get("attempts"):
        parts.insert(0, f"condition still false after {data['attempts']} attempts")
    return "\n".join(parts)[-MESSAGE_LIMIT:]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "cluster_cli_events"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        descriptor = os.environ.get("CLUSTER_CLI_EVENTS_FD")
        self._stream = os.fdopen(int(descriptor), "w", buffering=1) if descriptor else None
        log_path = os.environ.get("CLUSTER_CLI_EVENTS_LOG")
        self._log = open(log_path, "a", buffering=1, encoding="utf-8") if log_path else None  # noqa: SIM115

    def _emit(self, **event):
        event["t"] = round(time.time(), 3)
        line = json.dumps(event) + "\n"
        if self._stream is not None:
            self._stream.write(line)
        if self._log is not None:
            self._log.write(line)

    def v2_runner_on_start(self, host, task):
        # only for the profile: cluster-cli's progress has no use for one event per host and task
        if self._log is not None:
            self._log.write(json.dumps({"event": "start", "host": host.get_name(), "task": task.get_name(),
                                        "t": round(time.time(), 3)}) + "\n")

    def v2_playbook_on_play_start(self, play):
        self._emit(event="play", name=play.get_name())

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._emit(event="task", name=task.get_name(), role=task._role.get_name() if task._role else None)

    def v2_runner_on_ok(self, result):
        self._emit(event="ok", host=result._host.get_name(), task=result.task_name, changed=bool(result._result.get("changed")))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._emit(
            event="failed",
            host=result._host.get_name(),
            task=result.task_name,
            ignored=bool(ignore_errors),
            message=_message(result),
        )

    def v2_runner_on_unreachable(self, result):
        # a play or task with ignore_unreachable (site.yml: hosts that left the inventory) goes on
        ignored = bool(getattr(result._task, "ignore_unreachable", False))
        self._emit(event="unreachable", host=result._host.get_name(), task=result.task_name,
                   ignored=ignored, message=_message(result))

    def v2_runner_on_skipped(self, result):
        self._emit(event="skipped", host=result._host.get_name(), task=result.task_name)

    def v2_playbook_on_no_hosts_remaining(self):
        # Ansible stops the run: max_fail_percentage exceeded, or every host of the play (or wave) failed
        self._emit(event="stopped")

    def v2_playbook_on_stats(self, stats):
        recap = {}
        for host in sorted(stats.processed):
            summary = stats.summarize(host)
            recap[host] = {key: summary.get(key, 0) for key in ("ok", "changed", "failures", "unreachable", "skipped", "rescued", "ignored")}
        self._emit(event="stats", hosts=recap)
        for stream in (self._stream, self._log):
            if stream is not None:
                stream.flush()
