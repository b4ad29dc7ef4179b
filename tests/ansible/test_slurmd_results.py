"""Issue 17: the task results roles/slurmd costs per compute host, pinned.

Every result a host runs or skips costs the control node about 17 ms of main-process CPU; slurmd is
the largest role per compute host. The whole role runs here on a local-connection host as on a
host without systemd: the package already installed (a fake dpkg-query), a fake GPU made as a
character device in a temporary directory, pam_slurm_adopt on with the PAM files in that directory
too, and a slurmd that "starts" (start-stop-daemon's base replaced by `true`) as this test's own
process with a listening port. The first run owes a restart (the marker slurm_common leaves after a
configuration change), the second run is a no-op.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, is_root, run_play, run_role, run_tasks, slurmd_host_files, write_executable

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="the role chowns to root and makes character devices"),
]

FAKE_DPKG_QUERY = """#!/bin/sh
echo 'slurmd=23.02.7-1 ii '
echo 'libpam-slurm-adopt=23.02.7-1 ii '
"""

FAKE_PAM_AUTH_UPDATE = """#!/bin/sh
# pam-auth-update --disable systemd: take pam_systemd out of the session file the role reads.
sed -i '/pam_systemd/d' "$PAM_SESSION_FILE"
"""

SSHD = "@include common-auth\naccount required pam_nologin.so\n@include common-account\n@include common-session\n"
SESSION = "session required pam_unix.so\nsession optional pam_systemd.so\n"

# Before the cut of issue 17 (this host: no systemd, a fake GPU, pam_slurm_adopt): 38 results on a
# first install (with the owed restart), 29 on a no-op, the argument check and the package include
# of roles/shared counted; 22 and 16 before the compute cut (one task stops the packaged
# slurmd.service and masks systemd-logind; the owed restart includes the service manager's own file,
# so no task of the other manager is skipped per batch).
RESULTS_FIRST_INSTALL = 20
RESULTS_NO_OP = 15


def _standalone(pending: Path, run_dir: Path) -> dict[str, object]:
    """The role's variables for a host without systemd whose slurmd "runs" as this process."""
    return {
        "common_service_manager": "standalone",
        "__slurmd_pending_dir": str(pending),
        "__slurmd_run_dir": str(run_dir),
        "__daemon_stop_base": ["true"],
        "__daemon_start_base": ["true"],
        "__slurmd_daemon": os.path.realpath(sys.executable),
    }


def _results(recap: dict[str, int]) -> int:
    return recap["ok"] + recap["skipped"] + recap["failed"]


def test_results_per_compute_host_stay_few(tmp_path: Path, listening_port: int, monkeypatch) -> None:
    bin_dir = tmp_path / "bin"
    write_executable(bin_dir / "dpkg-query", FAKE_DPKG_QUERY)
    write_executable(bin_dir / "pam-auth-update", FAKE_PAM_AUTH_UPDATE)
    pending, run_dir, pam = tmp_path / "pending", tmp_path / "run", tmp_path / "pam.d"
    for directory in (pending, run_dir, pam):
        directory.mkdir()
    (pending / "restart-slurmd").touch()
    (run_dir / "slurmd-c1.pid").write_text(f"{os.getpid()}\n")  # this process: alive, listening
    (pam / "sshd").write_text(SSHD)
    (pam / "common-session").write_text(SESSION)
    gpu = tmp_path / "dev" / "fake-gpu" / "nvidia0"
    extra = {
        **slurmd_host_files(tmp_path),
        **_standalone(pending, run_dir),
        "__slurmd_pam_access_file": str(tmp_path / "access-slurm-adopt.conf"),
        "__slurmd_pam_sshd_file": str(pam / "sshd"),
        "__slurmd_pam_session_file": str(pam / "common-session"),
        "slurmd_spool_dir": str(tmp_path / "spool"),
        "slurmd_pam_adopt_node": "c1",
        "slurmd_nodes": [{"name": "c1", "port": listening_port, "fake_gpus": [{"path": str(gpu), "minor": 0}]}],
        "slurmd_wait_timeout": 5,
    }
    env_prefix = bin_dir
    monkeypatch.setenv("PAM_SESSION_FILE", str(pam / "common-session"))
    first = run_role(tmp_path / "first", "slurmd", extra_vars=extra, hosts=("c1",), path_prefix=env_prefix)
    assert first.returncode == 0, first.explain()
    again = run_role(tmp_path / "again", "slurmd", extra_vars=extra, hosts=("c1",), path_prefix=env_prefix)
    assert again.returncode == 0, again.explain()
    adopted = (pam / "sshd").read_text()
    admins = (tmp_path / "access-slurm-adopt.conf").read_text()
    off = run_role(tmp_path / "off", "slurmd", extra_vars=extra | {"slurmd_pam_adopt_node": ""}, hosts=("c1",),
                   path_prefix=env_prefix)
    assert off.returncode == 0, off.explain()
    info = gpu.stat()
    assert stat.S_ISCHR(info.st_mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) == (195, 0)
    access = tmp_path / "access-slurm-adopt.conf"
    # before common-account: a `sufficient` module there (libpam-sss's pam_localuser) ends the stack
    assert adopted == SSHD.replace("@include common-account\n", (
        "# BEGIN cluster-cli: pam_slurm_adopt\n"
        f"account [success=1 default=ignore] pam_access.so accessfile={access}\n"
        "account required pam_slurm_adopt.so nodename=c1\n"
        "# END cluster-cli: pam_slurm_adopt\n"
        "@include common-account\n"
    ))
    assert "+:root:ALL\n" in admins and admins.endswith("-:ALL:ALL\n")
    # pam_slurm_adopt off again: its lines and who may log in without a job are taken out.
    assert (pam / "sshd").read_text() == SSHD and not access.exists()
    assert "pam_systemd" not in (pam / "common-session").read_text()
    assert not (pending / "restart-slurmd").exists()
    assert again.recap("c1")["changed"] == 0, again.explain()
    first_results, again_results = _results(first.recap("c1")), _results(again.recap("c1"))
    print(f"results per compute host: first install {first_results}, no-op {again_results}")
    assert first_results <= RESULTS_FIRST_INSTALL, f"{first_results} results on a first install: {first.recap('c1')}"
    assert again_results <= RESULTS_NO_OP, f"{again_results} results on a no-op: {again.recap('c1')}"


@pytest.mark.parametrize("owed", [False, True])
def test_one_find_tells_the_stale_instances_and_the_owed_restart_apart(
    tmp_path: Path, listening_port: int, owed: bool
) -> None:
    """run.yml's one find covers the instances' directory and the pending one: a pid file of an
    instance no longer configured is stopped and removed, the owed restart is done only when its
    marker is there, and neither is taken for the other."""
    pending, run_dir = tmp_path / "pending", tmp_path / "run"
    for directory in (pending, run_dir):
        directory.mkdir()
    if owed:
        (pending / "restart-slurmd").touch()
    (pending / "slurmd-pending.pid").touch()  # not an instance: it is not in the instances' directory
    (run_dir / "restart-slurmd").touch()  # not a marker: it is not in the pending directory
    for name in ("c1", "gone"):
        (run_dir / f"slurmd-{name}.pid").write_text(f"{os.getpid()}\n")
    extra = {
        **_standalone(pending, run_dir),
        "slurmd_nodes": [{"name": "c1", "port": listening_port, "fake_gpus": []}],
        "slurmd_wait_timeout": 5,
    }
    include = {"ansible.builtin.include_role": {"name": "slurmd", "tasks_from": "run", "public": True}}
    run = run_play(tmp_path / "work", {"tasks": [include]}, {HOST: {}}, extra)
    assert run.returncode == 0, run.explain()
    assert not (run_dir / "slurmd-gone.pid").exists() and (run_dir / "slurmd-c1.pid").exists()
    assert "Stop: the slurmd instances no longer configured" in run.stdout
    assert ("Start again: slurmd c1" in run.stdout) is owed
    assert not (pending / "restart-slurmd").exists()
    assert (pending / "slurmd-pending.pid").exists() and (run_dir / "restart-slurmd").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"slurmd_conf_server": "ctl:6817, ctl2"},
         "slurmd_conf_server must be host[:port] entries separated by commas, without white space (got 'ctl:6817, ctl2')."),
        ({"slurmd_nodes": [{"name": "a", "port": 7001}, {"name": "b", "port": 7001}]},
         "slurmd_nodes must list at least one instance, each with a unique Slurm node name and port"),
        ({"slurmd_nodes": [{"name": "a", "port": 7001, "fake_gpus": [{"path": "dev/x", "minor": 0}]}],
          "slurmd_conf_server": "ctl"},
         "fake_gpus entries with unique absolute paths and minor numbers >= 0"),
        ({"slurmd_conf_server": "ctl:6817,ctl2"}, None),
    ],
)
def test_one_preflight_check_names_what_is_wrong(tmp_path: Path, extra: dict, message: str | None) -> None:
    run = run_tasks(tmp_path, "slurmd", ["preflight"], extra)
    assert (run.returncode == 0) is (message is None), run.explain()
    if message is not None:
        assert message in run.text, run.explain()
