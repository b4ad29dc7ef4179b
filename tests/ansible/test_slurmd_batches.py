"""roles/slurmd's owed restart in batches (slurmd_restart_batch): each batch is stopped only after
slurmctld has seen the one before it start again, and a restart without batches asks slurmctld
nothing. slurmctld is a fake scontrol on PATH whose SlurmdStartTime changes at every call; the
slurmd "restarts" are logged by the start-stop-daemon stand-ins; the host runs without systemd.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, run_play, write_executable

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

# `scontrol --oneliner show node a,b` ($4): one line per node, SlurmdStartTime = the number of this call.
FAKE_SCONTROL = """#!/bin/sh
log={log}
count=$(( $(cat {log}.count 2>/dev/null || echo 0) + 1 )); echo $count > {log}.count
echo "scontrol $4" >> $log
for node in $(echo "$4" | tr , ' '); do
  echo "NodeName=$node Arch=x86_64 State=IDLE SlurmdStartTime=$count"
done
"""


def _restart(tmp_path: Path, port: int, batch: int, running: tuple[str, ...] = ("t1", "t2", "t3")) -> list[str]:
    pending, run_dir, log = tmp_path / "pending", tmp_path / "run", tmp_path / "calls.log"
    for directory in (pending, run_dir):
        directory.mkdir(parents=True)
    (pending / "restart-slurmd").touch()
    names = ["t1", "t2", "t3"]
    for name in running:
        (run_dir / f"slurmd-{name}.pid").write_text(f"{os.getpid()}\n")  # alive throughout
    bin_dir = tmp_path / "bin"
    write_executable(bin_dir / "scontrol", FAKE_SCONTROL.format(log=log))
    logged = ["sh", "-c", f'for a; do last=$a; done; echo "$0 $last" >> {log}']
    extra = {
        "common_service_manager": "standalone",
        "__slurmd_pending_dir": str(pending),
        "__slurmd_run_dir": str(run_dir),
        "__daemon_stop_base": [*logged, "stop"],
        "__daemon_start_base": [*logged, "start"],
        "__slurmd_daemon": os.path.realpath(sys.executable),
        "slurmd_nodes": [{"name": name, "port": port, "fake_gpus": []} for name in names],
        "slurmd_restart_batch": batch,
        "slurmd_wait_timeout": 5,
    }
    include = {"ansible.builtin.include_role": {"name": "slurmd", "tasks_from": "run", "public": True}}
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = run_play(tmp_path / "work", {"tasks": [include]}, {HOST: {}}, extra, env=env)
    assert run.returncode == 0, run.explain()
    assert not (pending / "restart-slurmd").exists()
    # stop's last argument is the pid file (slurmd-NAME.pid), start's the node name (-N NAME)
    return [line.replace(f"{run_dir}/slurmd-", "").removesuffix(".pid") for line in log.read_text().splitlines()]


def test_each_batch_waits_for_slurmctld_to_see_the_one_before(tmp_path: Path, listening_port: int) -> None:
    assert _restart(tmp_path, listening_port, 2) == [
        "scontrol t1,t2", "stop t1", "stop t2", "start t1", "start t2", "scontrol t1,t2",
        "scontrol t3", "stop t3", "start t3", "scontrol t3",
    ]


def test_without_batches_every_instance_restarts_at_once_and_slurmctld_is_not_asked(
    tmp_path: Path, listening_port: int
) -> None:
    assert _restart(tmp_path, listening_port, 0) == ["stop t1", "stop t2", "stop t3", "start t1", "start t2", "start t3"]


def test_an_instance_that_does_not_run_is_started_not_restarted_and_a_first_install_restarts_nothing(
    tmp_path: Path, listening_port: int
) -> None:
    # The start's stand-in makes no pid file: every instance without one is started by run.yml's start.
    assert _restart(tmp_path / "one", listening_port, 0, running=("t1", "t2")) == [
        "stop t1", "stop t2", "start t1", "start t2", "start t3"]
    assert _restart(tmp_path / "none", listening_port, 2, running=()) == ["start t1", "start t2", "start t3"]
