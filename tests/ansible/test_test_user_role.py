"""roles/training_env's smoke test user and work directory, run for real on localhost.

The checks of existing accounts only read the user database (no root needed). The creation test
needs root: it creates a throw-away user and group with free ids and deletes them afterwards.
"""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, is_root, run_tasks

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

THROWAWAY = "clitest-smoke"
RESULTS_PER_HOST_OF_ACCOUNTS = 6


def free_id(start: int = 64190) -> int:
    """An id free both as a UID and as a GID."""
    taken = {entry.pw_uid for entry in pwd.getpwall()} | {entry.gr_gid for entry in grp.getgrall()}
    return next(number for number in range(start, start + 1000) if number not in taken)


def preflight(tmp_path: Path, **variables: object):
    return run_tasks(tmp_path, "training_env", ["preflight"], variables)


def test_an_existing_user_with_other_ids_fails_naming_host_user_and_both_ids(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    wanted = free_id()
    run = preflight(tmp_path, training_env_test_user="nobody", training_env_test_user_uid=wanted, training_env_test_user_gid=wanted)
    assert run.returncode != 0
    assert f"{HOST}: user nobody has UID {nobody.pw_uid}, expected {wanted}; user nobody has primary GID {nobody.pw_gid}, expected {wanted}." in run.text
    assert "nothing is renumbered automatically" in run.text


def test_a_one_host_cluster_keeps_the_existing_user_with_a_warning(tmp_path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    wanted = free_id()
    run = preflight(
        tmp_path,
        training_env_test_user="nobody",
        training_env_test_user_uid=wanted,
        training_env_test_user_gid=wanted,
        training_env_test_user_strict=False,
    )
    assert run.returncode == 0, run.explain()
    assert f"user nobody has UID {nobody.pw_uid}, expected {wanted}" in run.text
    assert "kept as it is" in run.text


def test_ids_held_by_other_accounts_fail_before_anything_is_created(tmp_path: Path) -> None:
    run = preflight(
        tmp_path,
        training_env_test_user="clitest-no-such-user",
        training_env_test_user_uid=pwd.getpwnam("nobody").pw_uid,
        training_env_test_user_gid=free_id(),
    )
    assert run.returncode != 0
    assert f"{HOST}: UID {pwd.getpwnam('nobody').pw_uid} belongs to user nobody, so user clitest-no-such-user cannot be created with it. Choose free ids for the test user" in run.text


@pytest.fixture
def throwaway_account() -> Iterator[int]:
    if not is_root():
        pytest.skip("creating a user needs root")
    for name in (THROWAWAY,):
        assert name not in {entry.pw_name for entry in pwd.getpwall()}, f"{name} exists already"
    number = free_id()
    yield number
    subprocess.run(["userdel", "--remove", THROWAWAY], capture_output=True, check=False)
    subprocess.run(["groupdel", THROWAWAY], capture_output=True, check=False)


def test_user_group_home_and_work_dir_are_created_once(tmp_path: Path, throwaway_account: int) -> None:
    number = throwaway_account
    work_dir = tmp_path / "shared" / "smoke"
    variables = {
        "training_env_test_user": THROWAWAY,
        "training_env_test_user_uid": number,
        "training_env_test_user_gid": number,
        "training_env_work_dir": str(work_dir),
        "training_env_venv_path": str(tmp_path / "venv"),
    }
    phases = ["preflight", "test_user", "configure"]
    first = run_tasks(tmp_path / "first", "training_env", phases, variables)
    assert first.returncode == 0, first.explain()
    user = pwd.getpwnam(THROWAWAY)
    assert (user.pw_uid, user.pw_gid, grp.getgrgid(user.pw_gid).gr_name) == (number, number, THROWAWAY)
    assert user.pw_shell == "/bin/bash"
    assert Path(user.pw_dir).is_dir() and os.stat(user.pw_dir).st_uid == number
    status = os.stat(work_dir)
    assert (status.st_uid, status.st_gid, status.st_mode & 0o7777) == (number, number, 0o755)

    again = run_tasks(tmp_path / "again", "training_env", phases, variables)
    assert again.returncode == 0, again.explain()
    assert again.recap()["changed"] == 0

    # Results per host of the account tasks once the account is there (issue 17): the two includes, the two
    # run_once variable checks, the check of the ids (was getent, two asserts and a warning) and the creation,
    # skipped when the check found nothing missing (was a group task and a user task).
    accounts = run_tasks(tmp_path / "accounts", "training_env", ["preflight", "test_user"], variables)
    recap = accounts.recap()
    assert accounts.returncode == 0 and recap["changed"] == 0, accounts.explain()
    assert recap["ok"] + recap["skipped"] + recap["failed"] <= RESULTS_PER_HOST_OF_ACCOUNTS, recap
    assert "skipping: [testhost]" in accounts.text

    # Another host would have it with another UID: the play stops there, nothing is renumbered.
    other = free_id(number + 1)
    clash = run_tasks(tmp_path / "clash", "training_env", phases, variables | {"training_env_test_user_uid": other})
    assert clash.returncode != 0
    assert f"{HOST}: user {THROWAWAY} has UID {number}, expected {other}" in clash.text
    assert pwd.getpwnam(THROWAWAY).pw_uid == number
