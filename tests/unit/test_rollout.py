"""Rolling bring-up: the inventory's deploy section, the waves' threshold, and what a deploy says
and records when hosts failed, from the runner's record of a (fake) event stream."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from unit_helpers import BASE, edit, load, problem, problems

from cluster_cli import deploy as deploy_steps
from cluster_cli.ansible.runner import PlaybookResult, _record
from cluster_cli.cli import main
from cluster_cli.deployed import DeployedRecord, load_record
from cluster_cli.render.ansible_inventory import host_reach
from cluster_cli.errors import ExitCode
from cluster_cli.paths import cluster_state_dir
from cluster_cli.plan import Plan
from cluster_cli.rollout import COMPUTE_PLAY, count_lines, outcome, stopping_failures

LAST_PLAY = deploy_steps.last_play("site.yml")
COMPUTE = ["box", "gpu1", "gpu2", "gpu3", "gpu4"]  # BASE's compute hosts; "head" is the controller
HOSTS = ["head", *COMPUTE]


# --- the inventory's deploy section -------------------------------------------------------------

def with_deploy(section: str) -> str:
    return edit(BASE, "partitions:\n", f"deploy:\n{section}partitions:\n")


@pytest.mark.parametrize(("line", "field", "message"), [
    ("  max_fail_percentage: 101", "deploy.max_fail_percentage", "Input should be less than or equal to 100"),
    ("  max_fail_percentage: -1", "deploy.max_fail_percentage", "Input should be greater than or equal to 0"),
    ("  max_fail_percentage: half", "deploy.max_fail_percentage",
     "Input should be a valid integer, unable to parse string as an integer"),
    ("  batch: 0", "deploy.batch", "Input should be greater than or equal to 1"),
])
def test_a_bad_deploy_setting_is_a_file_line_field_error(line: str, field: str, message: str) -> None:
    text = with_deploy(line + "\n")
    assert problems(text) == [problem(text, line.strip(), field, message)]


def test_an_unknown_deploy_key_is_refused() -> None:
    text = with_deploy("  max_fail_percent: 10\n")
    assert [found.split(": ", 2)[1] for found in problems(text)] == ["deploy.max_fail_percent"]


@pytest.mark.parametrize(("inventory", "flags", "expected"), [
    ("", (None, None), (None, 100)),  # as before: all at once, a failed host stops nobody else
    ("", (4, None), (4, 0)),  # as before: in waves, a failed host stops the rollout
    ("  batch: 8\n  max_fail_percentage: 25\n", (None, None), (8, 25)),
    ("  batch: 8\n  max_fail_percentage: 25\n", (2, 50), (2, 50)),  # the flags win
    ("  max_fail_percentage: 25\n", (None, 0), (None, 0)),  # 0 given on the command line is 0
    ("  max_fail_percentage: 30\n", (None, None), (None, 30)),  # also for the one wave of all hosts
])
def test_the_waves_and_their_threshold_come_from_the_flags_then_the_inventory(inventory, flags, expected) -> None:
    cluster = load(with_deploy(inventory) if inventory else BASE)
    batch, max_fail = deploy_steps.rollout_settings(cluster, *flags)
    assert (batch, max_fail) == expected
    variables = deploy_steps.rollout_vars(cluster, batch, max_fail)
    assert variables["deploy_max_fail_percentage"] == expected[1]
    assert ("deploy_slurmd_serial" in variables) == (expected[0] is not None)


# --- what a run did, from its events -----------------------------------------------------------

def play(name: str, *results: dict) -> list[dict]:
    return [{"event": "play", "name": name}, *results]


def ok(host: str, task: str = "Install") -> dict:
    return {"event": "ok", "host": host, "task": task, "changed": False}


def failed(host: str, task: str, message: str) -> dict:
    return {"event": "failed", "host": host, "task": task, "ignored": False, "message": message}


def recorded(events: list[dict], failed_hosts: tuple[str, ...] = ()) -> PlaybookResult:
    """A PlaybookResult as the runner keeps it from these events, closed by Ansible's recap."""
    result = PlaybookResult(returncode=2 if failed_hosts else 0, duration_s=1.0, log_path=Path("deploy.log"))
    current: dict = {}
    wave: set[str] = set()
    seen = sorted({event["host"] for event in events if "host" in event})
    recap = {host: {"ok": 1, "failures": int(host in failed_hosts), "unreachable": 0} for host in seen}
    for event in [*events, {"event": "stats", "hosts": recap}]:
        _record(result, event, current, wave)
    return result


def base_plays() -> list[dict]:
    return [*play("Preflight on the control node", ok("localhost")),
            *play("Base of every cluster host", *(ok(host) for host in HOSTS)),
            *play("Controller", ok("head"))]


def waves(*hosts_per_wave: list[dict]) -> list[dict]:
    """The compute play once per wave, its tasks in the slurmd role."""
    task = {"event": "task", "name": "Start slurmd", "role": "slurmd"}
    return [event for wave in hosts_per_wave for event in play(COMPUTE_PLAY, task, *wave)]


def run_with_one_bad_host_under_the_threshold() -> PlaybookResult:
    """Waves of two; gpu3 fails in the second, the rollout goes on and the run gets to its end."""
    events = [*base_plays(),
              *waves([ok("box"), ok("gpu1")],
                     [ok("gpu2"), failed("gpu3", "Start slurmd", "slurmd: fatal: bad gres.conf"), ok("gpu2", "Wait")],
                     [ok("gpu4")]),
              *play("Training environment", *(ok(host) for host in ["head", "box", "gpu1", "gpu2", "gpu4"])),
              *play(LAST_PLAY, ok("head"))]
    return recorded(events, ("gpu3",))


def run_stopped_in_the_second_wave() -> PlaybookResult:
    """Threshold 0: gpu2 fails, Ansible stops the run at the end of that task; gpu3 of the same
    wave is cut off, gpu4 is never reached and no later play runs."""
    events = [*base_plays(),
              *waves([ok("box"), ok("gpu1")],
                     [ok("gpu2"), ok("gpu3"), failed("gpu2", "Start slurmd", "timed out"), {"event": "stopped"}])]
    return recorded(events, ("gpu2",))


def test_one_bad_host_under_the_threshold_is_listed_and_the_others_are_deployed() -> None:
    found = outcome(run_with_one_bad_host_under_the_threshold(), HOSTS, COMPUTE, LAST_PLAY)
    assert found.finished
    assert found.deployed == ["box", "gpu1", "gpu2", "gpu4", "head"]
    [failure] = found.failures
    assert (failure.host, failure.play, failure.task, failure.message) == (
        "gpu3", COMPUTE_PLAY, "Start slurmd", "slurmd: fatal: bad gres.conf")
    assert count_lines(found) == ["hosts: 5 ok, 1 failed, 0 unreachable, of 6", "4 of 5 compute hosts deployed"]


def test_a_run_ansible_stopped_deploys_no_host_and_says_where_each_compute_host_stands() -> None:
    found = outcome(run_stopped_in_the_second_wave(), HOSTS, COMPUTE, LAST_PLAY)
    assert not found.finished and found.deployed == []
    assert found.stopped_in == COMPUTE_PLAY and found.cut_off == ["gpu3"]
    assert count_lines(found) == [
        "hosts: 5 ok, 1 failed, 0 unreachable, of 6",
        "0 of 5 compute hosts deployed",
        f'the deploy stopped in play "{COMPUTE_PLAY}" before its last play, so no host counts as deployed: '
        "2 through the compute play, 1 stopped with their wave (gpu3), 1 not reached",
    ]


def test_a_run_that_never_got_to_its_last_play_deploys_no_host_even_without_a_stop_event() -> None:
    # a wave whose hosts were all unreachable ends the run in Ansible's executor, with no callback
    events = [*base_plays(), *waves([{"event": "unreachable", "host": "box", "task": "Install", "ignored": False,
                                      "message": "ssh: connect to host box port 22: No route to host"},
                                     {"event": "unreachable", "host": "gpu1", "task": "Install", "ignored": False,
                                      "message": "ssh: connect to host gpu1 port 22: No route to host"}])]
    found = outcome(recorded(events, ("box", "gpu1")), HOSTS, COMPUTE, LAST_PLAY)
    assert found.deployed == [] and found.unreachable == ["box", "gpu1"]
    assert count_lines(found)[:2] == ["hosts: 4 ok, 0 failed, 2 unreachable, of 6", "0 of 5 compute hosts deployed"]
    assert count_lines(found)[2].endswith("0 through the compute play, 3 not reached")


def test_each_host_is_listed_once_with_the_failure_that_stopped_it() -> None:
    # the post-deploy check's rescue fails with the readable reason after the polling task failed
    events = [*base_plays(), *play(LAST_PLAY, failed("head", "Wait until every node is registered", "still false"),
                                   failed("head", "Report the nodes that are not ready", "gpu3 (down)"))]
    [failure] = stopping_failures(recorded(events, ("head",)))
    assert (failure.task, failure.message) == ("Report the nodes that are not ready", "gpu3 (down)")


def test_hosts_outside_the_cluster_are_not_counted_but_their_failures_are_kept() -> None:
    events = play("Preflight on the control node", failed("localhost", "Check the Ansible version", "too old"))
    found = outcome(recorded(events, ("localhost",)), HOSTS, COMPUTE, LAST_PLAY)
    assert found.hosts == [] and [failure.host for failure in found.failures] == ["localhost"]


# --- the deploy command: the failed-host list, the exit code, the record -----------------------

@pytest.fixture
def base_inventory(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(deploy_steps, "current_plan", lambda prepared, rotating=False: (Plan("test", None), {}))
    path = tmp_path / "inventory.yaml"
    path.write_text(BASE, encoding="utf-8")
    return str(path)


def fake_playbook(monkeypatch, result: PlaybookResult) -> list[tuple[str, list[str]]]:
    """site.yml "runs" and returns ``result``; the daemon logs fetched from hosts are recorded."""
    fetched: list[tuple[str, list[str]]] = []

    def run(prepared, playbook, options, on_event=None, extra_var_files=None):
        return result

    def ad_hoc(inventory, host, argv, timeout_s=60):
        fetched.append((host, list(argv)))
        return 0, f"{host} log line 1\n{host} log line 2"

    monkeypatch.setattr(deploy_steps, "run", run)
    monkeypatch.setattr(deploy_steps, "run_ad_hoc", ad_hoc)
    return fetched


def test_a_deploy_with_a_failed_host_lists_it_records_only_the_others_and_fails(base_inventory, monkeypatch):
    fetched = fake_playbook(monkeypatch, run_with_one_bad_host_under_the_threshold())
    # box runs two slurmd: --batch 4 is two hosts per wave, two restarts on each at a time
    output = CliRunner().invoke(main, ["deploy", base_inventory, "--full", "--batch", "4",
                                       "--max-fail-percentage", "50"])
    assert output.exit_code == ExitCode.FAILURE, output.output
    text = " ".join(output.output.split())  # the terminal's line wrapping left out
    assert "2 compute host(s) per wave; the rollout stops when more than 50% of a wave failed" in text
    assert f'gpu3: failed: play "{COMPUTE_PLAY}", task "Start slurmd"' in text
    assert "slurmd: fatal: bad gres.conf" in text
    assert "--- last lines of /var/log/slurm/slurmd-gpu3.log on gpu3: gpu3 log line 1 gpu3 log line 2" in text
    assert "hosts: 5 ok, 1 failed, 0 unreachable, of 6" in text and "4 of 5 compute hosts deployed" in text
    assert fetched == [("gpu3", ["tail", "-n", str(deploy_steps.LOG_TAIL_LINES), "/var/log/slurm/slurmd-gpu3.log"])]
    record = load_record(cluster_state_dir("test"))
    assert sorted(record.hosts) == ["box", "gpu1", "gpu2", "gpu4", "head"], "a failed host was recorded as deployed"
    assert "gpu3" not in record.reach


def test_a_deploy_ansible_stopped_records_nothing(base_inventory, monkeypatch):
    fake_playbook(monkeypatch, run_stopped_in_the_second_wave())
    output = CliRunner().invoke(main, ["deploy", base_inventory, "--full", "--batch", "2"])
    assert output.exit_code == ExitCode.FAILURE, output.output
    text = " ".join(output.output.split())
    assert "more than 0% of a wave failed" in text and "0 of 5 compute hosts deployed" in text
    assert not (cluster_state_dir("test") / "deployed.json").exists(), "a stopped deploy wrote its record"


def test_daemon_logs_are_fetched_for_the_first_failed_hosts_only(base_inventory, monkeypatch):
    monkeypatch.setattr(deploy_steps, "LOG_TAIL_HOSTS", 1)
    events = [*base_plays(), *waves([failed("box", "Start slurmd", "box broke"), failed("gpu1", "Start slurmd",
                                                                                          "gpu1 broke")])]
    fetched = fake_playbook(monkeypatch, recorded(events, ("box", "gpu1")))
    output = CliRunner().invoke(main, ["deploy", base_inventory, "--full"])
    assert output.exit_code == ExitCode.FAILURE, output.output
    assert {host for host, _ in fetched} == {"box"}
    text = " ".join(output.output.split())
    assert "gpu1 broke" in text and "(daemon logs of the first 1 failed hosts only)" in text


@pytest.mark.parametrize("stopped", [False, True])
def test_a_host_that_left_the_inventory_is_forgotten_only_once_its_slurmd_was_stopped(base_inventory, monkeypatch,
                                                                                      stopped):
    record = DeployedRecord(cluster_state_dir("test") / "deployed.json")
    with_gpu5 = edit(edit(BASE, "gpu[1-4]", "gpu[1-5]"), "10.0.1.[1-4]", "10.0.1.[1-5]")
    record.remember_reach({"gpu5": host_reach(load(with_gpu5))["gpu5"]})
    record.save()
    stop = failed("gpu5", "Stop the slurmd instances of the host", "systemctl: failed") if stopped else ok("gpu5")
    events = [*base_plays(), *waves([ok(host) for host in COMPUTE]),
              *play("Stop slurmd where no node of the inventory runs", stop), *play(LAST_PLAY, ok("head"))]
    fake_playbook(monkeypatch, recorded(events, ("gpu5",) if stopped else ()))
    output = CliRunner().invoke(main, ["deploy", base_inventory, "--full"])
    assert output.exit_code == (ExitCode.FAILURE if stopped else ExitCode.OK), output.output
    assert ("gpu5" in load_record(cluster_state_dir("test")).reach) == stopped


def test_the_live_progress_says_when_ansible_stops_the_run() -> None:
    from io import StringIO

    from rich.console import Console

    from cluster_cli.progress import PlaybookProgress
    out = StringIO()
    progress = PlaybookProgress(Console(file=out, width=200))
    progress({"event": "failed", "host": "gpu3", "task": "Start slurmd", "message": "bad"})
    progress({"event": "stopped"})
    assert out.getvalue().splitlines() == [
        "  gpu3: FAILED: Start slurmd", "      bad",
        "Ansible stopped the run: more hosts of a wave failed than its threshold allows, or every host of the "
        "play or wave failed"]
