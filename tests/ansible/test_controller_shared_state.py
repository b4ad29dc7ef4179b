"""HA controllers must share StateSaveLocation: the primary keeps a marker there that every backup
must see in its own slurmctld_state_dir, or the deploy stops before slurmctld starts on it.

Run for real with ansible-playbook: the slurmctld role's configure tasks on two inventory hosts
that both connect locally, primary and backup of group slurm_controller, each with its own
slurmctld_state_dir under a temporary directory (two directories: not shared; one: shared).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from role_runner import PlaybookRun, ansible_playbook, is_root, run_play

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="the role chowns the state directory to the slurm user (needs root)"),
]

MARKER = ".cluster-cli-shared-state"
EXTRA = {
    "common_service_manager": "standalone",  # no systemd drop-in
    "common_slurm_user": "root",
    "common_slurm_group": "root",
}
CONFIGURE = {"tasks": [{"name": "slurmctld configure",
                        "ansible.builtin.include_role": {"name": "slurmctld", "tasks_from": "configure"}}]}


def _configure(tmp_path: Path, state_dirs: dict[str, Path], run: str = "work") -> PlaybookRun:
    hosts = {host: {"slurmctld_state_dir": str(directory)} for host, directory in state_dirs.items()}
    return run_play(tmp_path / run, CONFIGURE, hosts, EXTRA, groups={"slurm_controller": list(state_dirs)})


def test_a_backup_with_its_own_state_directory_is_refused(tmp_path: Path) -> None:
    primary, backup = tmp_path / "ctl1-state", tmp_path / "ctl2-state"
    run = _configure(tmp_path, {"ctl1": primary, "ctl2": backup})
    assert run.returncode != 0, run.explain()
    assert (
        f"The backup controller ctl2 does not share StateSaveLocation with the primary ctl1: {backup} on ctl2"
        in run.text
    ), run.explain()
    assert "Mount the same shared directory (e.g. NFS) at StateSaveLocation" in run.text
    assert run.recap("ctl2")["failed"] == 1 and run.recap("ctl1")["failed"] == 0
    assert (primary / MARKER).stat().st_mode & 0o777 == 0o600
    assert not (backup / MARKER).exists()


def test_slurmctld_is_not_started_on_a_refused_backup(tmp_path: Path) -> None:
    """configure then run, as the role does: the start command (here: touch a file) runs on the
    primary only. The port waited for is closed, so the primary's run fails after its start."""
    primary, backup = tmp_path / "ctl1-state", tmp_path / "ctl2-state"
    include = [{"name": f"slurmctld {name}",
                "ansible.builtin.include_role": {"name": "slurmctld", "tasks_from": name}} for name in ("configure", "run")]
    extra = {**EXTRA, "__slurmctld_pending_dir": str(tmp_path / "pending"),
             "__slurmctld_pidfile": str(tmp_path / "{{ inventory_hostname }}.pid"),
             "__daemon_start_base": ["sh", "-c", 'touch "$0"', str(tmp_path / "{{ inventory_hostname }}.started")],
             "slurmctld_accounting_host": "", "slurmctld_port": 9, "slurmctld_wait_timeout": 1}
    hosts = {"ctl1": {"slurmctld_state_dir": str(primary)}, "ctl2": {"slurmctld_state_dir": str(backup)}}
    run = run_play(tmp_path / "work", {"tasks": include}, hosts, extra, groups={"slurm_controller": ["ctl1", "ctl2"]})
    assert "The backup controller ctl2 does not share" in run.text, run.explain()
    assert (tmp_path / "ctl1.started").exists(), run.explain()
    assert not (tmp_path / "ctl2.started").exists()


def test_a_backup_with_a_stale_marker_of_its_own_is_refused(tmp_path: Path) -> None:
    primary, backup = tmp_path / "ctl1-state", tmp_path / "ctl2-state"
    backup.mkdir()
    (backup / MARKER).write_text("0123456789abcdef0123456789abcdef\n")  # once shared, no more
    run = _configure(tmp_path, {"ctl1": primary, "ctl2": backup})
    assert run.returncode != 0 and "The backup controller ctl2 does not share" in run.text, run.explain()


def test_controllers_sharing_the_state_directory_pass_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    shared = tmp_path / "shared-state"
    first = _configure(tmp_path, {"ctl1": shared, "ctl2": shared}, "first")
    assert first.returncode == 0, first.explain()
    token = (shared / MARKER).read_text()
    assert len(token.strip()) == 32
    again = _configure(tmp_path, {"ctl1": shared, "ctl2": shared}, "again")
    assert again.returncode == 0, again.explain()
    assert again.recap("ctl1")["changed"] == 0 and again.recap("ctl2")["changed"] == 0, again.explain()
    assert (shared / MARKER).read_text() == token


def test_the_state_directory_as_deploy_passes_it_an_extra_variable_is_shared(tmp_path: Path) -> None:
    """deploy sets slurmctld_state_dir in cluster_vars.yml (-e): the same directory on both."""
    shared = tmp_path / "shared-state"
    run = run_play(tmp_path / "work", CONFIGURE, {"ctl1": {}, "ctl2": {}}, {**EXTRA, "slurmctld_state_dir": str(shared)},
                   groups={"slurm_controller": ["ctl1", "ctl2"]})
    assert run.returncode == 0, run.explain()
    assert (shared / MARKER).is_file()


def test_a_single_controller_writes_no_marker(tmp_path: Path) -> None:
    state = tmp_path / "ctl1-state"
    run = _configure(tmp_path, {"ctl1": state})
    assert run.returncode == 0, run.explain()
    assert state.is_dir() and not (state / MARKER).exists()
