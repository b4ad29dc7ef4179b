"""roles/sssd's check that the directory knows none of the inventory's own users (the first
deploy's guard: people runs before SSSD), run for real with ansible-playbook on localhost and a
stand-in getent that answers for the directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from role_runner import ansible_playbook, run_tasks

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")


def _check(tmp_path: Path, directory_knows: list[str], local_users: list[str]):
    tmp_path.mkdir(parents=True, exist_ok=True)
    getent = tmp_path / "getent"
    known = " ".join(directory_knows)
    getent.write_text(f'#!/bin/sh\n[ "$1 $2 $3" = "-s sss passwd" ] || exit 9\nfor n in {known}; do [ "$4" = "$n" ] && exit 0; done\nexit 2\n')
    getent.chmod(0o755)
    return run_tasks(tmp_path / "work", "sssd", ["local_users_check"],
                     {"__sssd_getent": str(getent), "sssd_local_users": local_users})


def test_a_local_user_the_directory_knows_too_fails_the_host_naming_it(tmp_path: Path) -> None:
    run = _check(tmp_path, ["dora", "erin"], ["alice", "dora"])
    assert run.returncode != 0
    assert "testhost: the directory also knows dora, which people.users makes a local account of" in run.text, run.explain()


def test_local_users_the_directory_does_not_know_pass(tmp_path: Path) -> None:
    assert _check(tmp_path, ["dora"], ["alice", "bob"]).returncode == 0
    assert _check(tmp_path / "none", ["dora"], []).returncode == 0
