"""What the deploy shows for a failed task: its msg/stderr, never a poll loop's output."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("ansible")

PLUGIN = Path(__file__).resolve().parents[2] / "cluster_cli" / "ansible" / "callback_plugins" / "cluster_cli_events.py"
spec = importlib.util.spec_from_file_location("cluster_cli_events", PLUGIN)
assert spec and spec.loader
events = importlib.util.module_from_spec(spec)
spec.loader.exec_module(events)


def message(**data: object) -> str:
    return events._message(SimpleNamespace(_result=data))


def test_msg_and_stderr_are_the_message() -> None:
    assert message(msg="non-zero return code", stderr="slurmd: fatal: bad\n", stdout="noise") == (
        "non-zero return code\nslurmd: fatal: bad"
    )


def test_stdout_only_when_nothing_else_explains_and_only_its_tail() -> None:
    stdout = "\n".join(f"line {number}" for number in range(50))
    assert message(stdout=stdout) == "\n".join(f"line {number}" for number in range(40, 50))


def test_a_retry_loop_that_gave_up_says_so_without_its_polled_output() -> None:
    assert message(attempts=90, stdout="sl local_address rem_address\n0: 0100007F:0CEA") == (
        "condition still false after 90 attempts"
    )


def test_a_no_log_result_says_it_was_hidden_and_nothing_else() -> None:
    hidden = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
    assert message(censored=hidden, failed=True) == hidden


def test_long_messages_are_cut_to_the_limit() -> None:
    assert len(message(msg="x" * 10_000)) == events.MESSAGE_LIMIT


def test_with_an_events_log_every_event_is_timed_and_each_host_task_start_is_logged(tmp_path, monkeypatch) -> None:
    log = tmp_path / "events.jsonl"
    monkeypatch.delenv("CLUSTER_CLI_EVENTS_FD", raising=False)
    monkeypatch.setenv("CLUSTER_CLI_EVENTS_LOG", str(log))
    plugin = events.CallbackModule()
    plugin.v2_runner_on_start(SimpleNamespace(get_name=lambda: "c1"), SimpleNamespace(get_name=lambda: "Install"))
    plugin.v2_runner_on_skipped(SimpleNamespace(_host=SimpleNamespace(get_name=lambda: "c1"), task_name="Install"))
    plugin.v2_playbook_on_stats(SimpleNamespace(processed={}, summarize=lambda host: {}))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["start", "skipped", "stats"]
    assert lines[0]["host"] == "c1" and lines[0]["task"] == "Install"
    assert all(isinstance(line["t"], float) for line in lines)
    assert lines[0]["t"] <= lines[1]["t"] <= lines[2]["t"]
