"""roles/common's slurm and munge accounts (plugins/modules/cluster_accounts.py), checked in preflight on
localhost: the role variables point SlurmUser and munge at existing accounts of the host (nobody,
nogroup) with other ids. Check mode: nothing is created, so no root is needed for the checks."""

from __future__ import annotations

import grp
import pwd
from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, run_tasks

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

# Results per host of common's preflight on a host whose accounts are right: the variable check,
# the service manager, the accounts (one module run; was getent, an assert loop and a warning),
# the two mirror checks and the signing key's two tasks (skipped without a mirror), and the include.
RESULTS_PER_HOST_OF_PREFLIGHT = 8


def free_id(start: int = 64190) -> int:
    taken = {entry.pw_uid for entry in pwd.getpwall()} | {entry.gr_gid for entry in grp.getgrall()}
    return next(number for number in range(start, start + 1000) if number not in taken)


def _nobody() -> tuple[int, int, str]:
    nobody = pwd.getpwnam("nobody")
    return nobody.pw_uid, nobody.pw_gid, grp.getgrgid(nobody.pw_gid).gr_name


def test_a_slurm_user_with_other_ids_fails_naming_host_account_ids_and_the_fix(tmp_path: Path) -> None:
    uid, gid, group = _nobody()
    wanted = free_id()
    run = run_tasks(tmp_path, "common", ["preflight"], {
        "common_slurm_user": "nobody", "common_slurm_group": group, "common_slurm_uid": wanted, "common_slurm_gid": gid,
    })
    assert run.returncode != 0
    assert (f"{HOST}: user nobody has UID {uid}, expected {wanted}. Set the uid/gid variables (common_slurm_uid/gid, "
            "common_munge_uid/gid) to the ids this host already uses, or renumber the account by hand") in run.text


def test_a_slurm_id_held_by_another_name_fails(tmp_path: Path) -> None:
    uid, _, _ = _nobody()
    run = run_tasks(tmp_path, "common", ["preflight"], {"common_slurm_user": "clitest-no-such-user", "common_slurm_uid": uid})
    assert run.returncode != 0
    assert f"{HOST}: UID {uid} belongs to user nobody, so user clitest-no-such-user cannot be created with it." in run.text


def test_a_munge_account_with_other_ids_is_kept_with_a_warning(tmp_path: Path) -> None:
    uid, gid, group = _nobody()
    wanted = free_id()
    run = run_tasks(tmp_path, "common", ["preflight"], {
        "__common_munge_user": "nobody", "__common_munge_group": group, "common_munge_uid": wanted, "common_munge_gid": wanted,
    })
    assert run.returncode == 0, run.explain()
    assert (f"{HOST}: user nobody has UID {uid}, expected {wanted}: kept as it is (munge's ids need not match across "
            "hosts; only the key file's owner matters, and that follows the name).") in run.text
    assert f"{HOST}: group {group} has GID {gid}, expected {wanted}: kept as it is" in run.text


def test_results_per_host_of_preflight_stay_few(tmp_path: Path) -> None:
    uid, gid, group = _nobody()
    run = run_tasks(tmp_path, "common", ["preflight"], {
        "common_slurm_user": "nobody", "common_slurm_group": group, "common_slurm_uid": uid, "common_slurm_gid": gid,
    })
    assert run.returncode == 0, run.explain()
    recap = run.recap()
    results = recap["ok"] + recap["skipped"] + recap["failed"]
    assert results <= RESULTS_PER_HOST_OF_PREFLIGHT, f"{results} results (at most {RESULTS_PER_HOST_OF_PREFLIGHT}): {recap}"
    assert recap["changed"] == 0
