"""Owed restarts survive a deploy that stops half-way, and are cleared only by a restart that worked.

Run for real with ansible-playbook on localhost, the roles' own tasks and handlers, under the
repository's ansible.cfg (force_handlers = True). The daemons' start and stop commands are the
roles' private argv variables, pointed at `true` or `false`, and the pid files name this test's
own process (a daemon that stays up); the ports waited for are a socket this test listens on, or
one nothing listens on. Files go to a temporary directory.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from role_runner import HOST, PlaybookRun, ansible_playbook, is_root, run_play

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="the roles write root-owned files (needs root)"),
]

SLURM_CONF = "ClusterName=test\nNodeName=node[1-2] CPUs=4\nPartitionName=debug Nodes=node[1-2]\n"
GROUPS = {"slurm_controller": [HOST], "slurm_compute": [HOST]}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once it is closed


def _include(role: str, tasks_from: str) -> dict:
    return {"name": f"{role} {tasks_from}",
            "ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from, "public": True}}


def test_the_restart_is_owed_before_the_files_are_copied(tmp_path: Path) -> None:
    """A copy that fails half-way (the login shells' file, written last) leaves the new slurm.conf in place: the restart
    it needs must already be recorded, or no later deploy would see a change to act on."""
    in_place, rendered, pending = tmp_path / "etc", tmp_path / "build", tmp_path / "pending"
    for directory in (in_place, rendered, pending, tmp_path / "profile.d"):
        directory.mkdir()
    (in_place / "slurm.conf").write_text(SLURM_CONF)
    (tmp_path / "profile.d" / "slurm_conf.sh").mkdir()  # a directory where the last file goes: its write fails
    (rendered / "slurm.conf").write_text(SLURM_CONF.replace("node[1-2]", "node[1-3]"))  # a node added
    (rendered / "gres.conf").write_text("# rendered\n")
    (rendered / "cgroup.conf").write_text("# rendered\n")
    extra = {
        "slurm_common_config_src": str(rendered),
        "slurm_common_conf_dir": str(in_place),
        "slurm_common_pending_dir": str(pending),
        "slurm_common_version": "22.05.8-4+deb12u3",
        "__slurm_common_profile_dir": str(tmp_path / "profile.d"),
    }
    run = run_play(tmp_path / "work", {"tasks": [_include("slurm_common", "configure")]}, {HOST: {}}, extra,
                   groups=GROUPS)
    assert run.returncode != 0 and "Write the rendered Slurm configuration" in run.stdout, run.explain()
    assert "slurm_conf.sh exists and is not a regular file" in run.stdout, run.explain()
    assert "node[1-3]" in (in_place / "slurm.conf").read_text(), "the copy did not get as far as slurm.conf"
    assert sorted(path.name for path in pending.iterdir()) == ["restart-slurmctld", "restart-slurmd"]


def _slurmctld_restart(tmp_path: Path, start: str, port: int) -> tuple[PlaybookRun, Path]:
    pending = tmp_path / "pending"
    pending.mkdir()
    (pending / "restart-slurmctld").touch()
    (tmp_path / "slurmctld.pid").write_text(f"{os.getpid()}\n")  # "the daemon": alive throughout
    extra = {
        "common_service_manager": "standalone",
        "__slurmctld_pending_dir": str(pending),
        "__slurmctld_pidfile": str(tmp_path / "slurmctld.pid"),
        "__daemon_stop_base": ["true"],
        "__daemon_start_base": [start],
        "slurmctld_port": port,
        "slurmctld_accounting_host": "",
        "slurmctld_wait_timeout": 2,
    }
    return run_play(tmp_path / "work", {"tasks": [_include("slurmctld", "run")]}, {HOST: {}}, extra), pending


@pytest.mark.parametrize(("start", "failing_step"), [("false", "Start again: slurmctld"),
                                                     ("true", "Wait for the ports: slurmctld")])
def test_a_failed_slurmctld_restart_stays_owed(tmp_path: Path, start: str, failing_step: str) -> None:
    run, pending = _slurmctld_restart(tmp_path, start, _closed_port())  # "true": started, never listens
    assert run.returncode != 0 and failing_step in run.stdout, run.explain()
    assert (pending / "restart-slurmctld").exists(), "the owed restart was cleared although it failed"


def test_a_slurmctld_restart_that_worked_is_cleared(tmp_path: Path, listening_port: int) -> None:
    run, pending = _slurmctld_restart(tmp_path, "true", listening_port)
    assert run.returncode == 0, run.explain()
    assert not (pending / "restart-slurmctld").exists()


def _slurmd_restart(tmp_path: Path, start: str, port: int, batch: int) -> tuple[PlaybookRun, Path]:
    pending, run_dir = tmp_path / "pending", tmp_path / "run"
    for directory in (pending, run_dir):
        directory.mkdir()
    (pending / "restart-slurmd").touch()
    for name in ("t1", "t2"):
        (run_dir / f"slurmd-{name}.pid").write_text(f"{os.getpid()}\n")  # alive throughout
    extra = {
        "common_service_manager": "standalone",
        "__slurmd_pending_dir": str(pending),
        "__slurmd_run_dir": str(run_dir),
        "__daemon_stop_base": ["true"],
        "__daemon_start_base": [start],
        "__slurmd_batched": False,  # no slurmctld to ask: the batches are waited for by port only
        "slurmd_nodes": [{"name": "t1", "port": port, "fake_gpus": []},
                         {"name": "t2", "port": port, "fake_gpus": []}],
        "slurmd_restart_batch": batch,
        "slurmd_wait_timeout": 2,
    }
    return run_play(tmp_path / "work", {"tasks": [_include("slurmd", "run")]}, {HOST: {}}, extra), pending


@pytest.mark.parametrize("batch", [0, 1])
@pytest.mark.parametrize(("start", "failing_step"), [("false", "Start again: slurmd t1"),
                                                     ("true", "Wait for the ports: slurmd t1")])
def test_a_failed_slurmd_restart_stays_owed(tmp_path: Path, batch: int, start: str, failing_step: str) -> None:
    run, pending = _slurmd_restart(tmp_path, start, _closed_port(), batch)
    assert run.returncode != 0 and failing_step in run.stdout, run.explain()
    assert (pending / "restart-slurmd").exists(), "the owed restart was cleared although it failed"


@pytest.mark.parametrize("batch", [0, 1])
def test_a_slurmd_restart_that_worked_is_cleared(tmp_path: Path, listening_port: int, batch: int) -> None:
    run, pending = _slurmd_restart(tmp_path, "true", listening_port, batch)
    assert run.returncode == 0, run.explain()
    assert not (pending / "restart-slurmd").exists()
