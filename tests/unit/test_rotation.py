"""deploy --rotate-secrets: refused with --limit or --tags before anything is touched; otherwise
the old secrets are kept 0600 beside new ones, the build carries the new ones, every host is in
the run with the roles' rotation switches on, and no secret is ever printed."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from unit_helpers import SHIPPED_INVENTORIES

import yaml

from cluster_cli import deploy as deploy_steps
from cluster_cli.ansible.runner import TaskFailure
from cluster_cli.cli import main
from cluster_cli.errors import ClusterCliError, ExitCode
from cluster_cli.plan import Plan
from cluster_cli.secrets_store import DB_PASSWORD_FILE, MUNGE_KEY_FILE

LOCAL = str(SHIPPED_INVENTORIES["local"])
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def runner(tmp_path, monkeypatch) -> CliRunner:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return CliRunner()


def secrets_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "cluster-cli" / "local" / "secrets"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _nowhere(*args, **kwargs):
    raise AssertionError("a host was probed or a playbook started: the refusal came too late")


@pytest.fixture
def no_host(monkeypatch) -> None:
    monkeypatch.setattr("cluster_cli.probe.probe_host", _nowhere)
    monkeypatch.setattr("cluster_cli.ansible.runner.subprocess.Popen", _nowhere)


@pytest.mark.parametrize("partial", [["--limit", "localhost"], ["--tags", "munge"]])
def test_rotation_with_limit_or_tags_is_refused_before_anything_is_touched(runner, tmp_path, no_host, partial):
    result = runner.invoke(main, ["deploy", LOCAL, "--rotate-secrets", *partial])
    assert result.exit_code == ExitCode.INVALID, result.output
    assert f"--rotate-secrets cannot be combined with {partial[0]}" in result.stderr
    assert "every host in one pass" in result.stderr and "Nothing was changed" in result.stderr
    assert not (tmp_path / "state").exists(), "secrets or a build were made before the refusal"


@pytest.fixture
def old_secrets(runner, tmp_path) -> tuple[bytes, bytes]:
    assert runner.invoke(main, ["render", LOCAL]).exit_code == 0
    directory = secrets_dir(tmp_path)
    return (directory / MUNGE_KEY_FILE).read_bytes(), (directory / DB_PASSWORD_FILE).read_bytes()


@pytest.fixture
def playbooks(monkeypatch) -> list[dict]:
    """The deploy's playbook runs (prepared build, options, extra vars), with an empty plan."""
    runs: list[dict] = []

    def run_prepared(console, prepared, playbook, title, options, verbose, extra_vars=None, log_role=None,
                     closing=None):
        runs.append({"prepared": prepared, "options": options, "vars": extra_vars or {}})

    monkeypatch.setattr("cluster_cli.commands.playbook_output.run_prepared", run_prepared)
    monkeypatch.setattr(deploy_steps, "current_plan", lambda prepared, rotating=False: (Plan("local", None), {}))
    return runs


def _not_shown(output: str, *values: bytes) -> None:
    for value in values:
        for form in (value.decode("latin-1").strip(), value.hex(), base64.b64encode(value).decode()):
            assert form[:24] not in output, "a secret was printed"


def test_rotation_keeps_the_old_secrets_0600_and_takes_new_ones_to_every_host(runner, tmp_path, old_secrets, playbooks):
    old_key, old_password = old_secrets
    result = runner.invoke(main, ["deploy", LOCAL, "--rotate-secrets"])
    assert result.exit_code == 0, result.output
    directory = secrets_dir(tmp_path)
    backups = sorted(directory.glob("*.old"))
    assert [path.name.split(".")[0] for path in backups] == ["munge", "slurmdbd_password"]
    assert all(mode(path) == 0o600 for path in backups)
    assert backups[0].read_bytes() == old_key and backups[1].read_bytes() == old_password
    new_key, new_password = (directory / MUNGE_KEY_FILE).read_bytes(), (directory / DB_PASSWORD_FILE).read_bytes()
    assert new_key != old_key and new_password != old_password
    assert mode(directory / MUNGE_KEY_FILE) == mode(directory / DB_PASSWORD_FILE) == 0o600
    [run] = playbooks
    # the rotation's role variables, and the compute play's default threshold without --batch
    assert run["vars"] == {"munge_rotate_key": True, "slurmdbd_rotate_password": True, "deploy_max_fail_percentage": 100}
    assert run["options"].limit is None, "the rotation must reach every host, not the plan's changed ones"
    build = run["prepared"].build.directory
    assert new_password.decode().strip() in (build / "ansible" / "secret_vars.yml").read_text()
    assert all(str(path) in result.output for path in backups), "the user is not told where the old secrets are"
    assert "secrets rotate: every host (1) gets a new munge key" in result.output
    _not_shown(result.output, old_key, old_password, new_key, new_password)


def test_a_deploy_that_fails_after_the_rotation_says_where_the_old_secrets_are(runner, tmp_path, old_secrets,
                                                                              playbooks, monkeypatch):
    def failing(*args, **kwargs):
        raise ClusterCliError("deploy failed (ansible-playbook exit 2)")

    monkeypatch.setattr("cluster_cli.commands.playbook_output.run_prepared", failing)
    result = runner.invoke(main, ["deploy", LOCAL, "--rotate-secrets"])
    assert result.exit_code == ExitCode.FAILURE, result.output
    assert "did not finish" in result.output and "--rotate-secrets again" in result.output
    for path in sorted(secrets_dir(tmp_path).glob("*.old")):
        assert str(path) in result.output
    _not_shown(result.output, *old_secrets)


def test_check_with_rotation_rotates_nothing_and_says_what_it_would_do(runner, tmp_path, old_secrets, playbooks):
    result = runner.invoke(main, ["deploy", LOCAL, "--rotate-secrets", "--check"])
    assert result.exit_code == ExitCode.CHANGES, result.output
    assert "would get a new munge key" in result.output and "no secret was rotated" in result.output
    directory = secrets_dir(tmp_path)
    assert (directory / MUNGE_KEY_FILE).read_bytes() == old_secrets[0] and not list(directory.glob("*.old"))
    assert playbooks == []


def test_plan_with_rotation_lists_it_as_a_change_and_rotates_nothing(runner, tmp_path, old_secrets, playbooks):
    result = runner.invoke(main, ["plan", LOCAL, "--rotate-secrets", "--json"])
    assert result.exit_code == ExitCode.CHANGES, result.output
    lines = json.loads(result.stdout)["secrets_rotate"]
    assert any("new database password" in line for line in lines)
    assert (secrets_dir(tmp_path) / MUNGE_KEY_FILE).read_bytes() == old_secrets[0]


def test_a_secrets_preflight_refusal_shows_its_message_and_no_daemon_log(monkeypatch):
    """The refusal is the whole story: no munged or slurmdbd log tail after it (nothing ran)."""
    names = {task["name"] for path in ("roles/munge/tasks/key_check.yml", "roles/slurmdbd/tasks/password_check.yml")
             for entry in yaml.safe_load((REPO / path).read_text()) for task in [entry, *entry.get("block", [])]}
    assert deploy_steps.SECRETS_CHECK_TASKS <= names, "a check was renamed: its refusal would show daemon logs"
    monkeypatch.setattr(deploy_steps, "run_ad_hoc", _nowhere)
    for task in deploy_steps.SECRETS_CHECK_TASKS:
        assert deploy_steps.failure_log_tails(None, TaskFailure("ctl", task, "munge", "refused")) == []
