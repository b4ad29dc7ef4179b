"""roles/slurmd's teardown with purge: the pam_slurm_adopt lines come out of sshd's PAM stack and
who may log in without a job is removed, although the host's inventory still names an adopt node
(the teardown clears it for its own tasks). The PAM files lie in a temporary directory; the host
runs without systemd and its slurmd "stops" with `true`."""

from __future__ import annotations

from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, is_root, run_play, slurmd_host_files

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="cluster_files writes root's files"),
]

SSHD = "@include common-auth\n@include common-account\n@include common-session\n"


def test_purge_takes_the_pam_lines_out(tmp_path: Path) -> None:
    pam, run_dir = tmp_path / "pam.d", tmp_path / "run"
    for directory in (pam, run_dir, tmp_path / "spool" / "c1"):
        directory.mkdir(parents=True)
    access = tmp_path / "access-slurm-adopt.conf"
    access.write_text("+:root:ALL\n-:ALL:ALL\n")
    (pam / "sshd").write_text(SSHD.replace(
        "@include common-session\n",
        "# BEGIN cluster-cli: pam_slurm_adopt\n"
        f"account [success=1 default=ignore] pam_access.so accessfile={access}\n"
        "account required pam_slurm_adopt.so nodename=c1\n"
        "# END cluster-cli: pam_slurm_adopt\n@include common-session\n"))
    (run_dir / "slurmd-c1.pid").write_text("1\n")
    extra = {
        **slurmd_host_files(tmp_path),
        "common_service_manager": "standalone",
        "__slurmd_run_dir": str(run_dir),
        "__daemon_stop_base": ["true"],
        "__slurmd_pam_sshd_file": str(pam / "sshd"),
        "__slurmd_pam_access_file": str(access),
        "__slurmd_health_program": str(tmp_path / "cluster-cli-health"),
        "__slurmd_health_config": str(tmp_path / "cluster-cli-health.json"),
        "slurmd_spool_dir": str(tmp_path / "spool"),
        "slurmd_teardown_purge": True,
        "slurmd_nodes": [{"name": "c1", "port": 7001, "fake_gpus": []}],
    }
    play = {"tasks": [{"ansible.builtin.include_role": {"name": "slurmd", "tasks_from": "teardown"}}]}
    run = run_play(tmp_path / "work", play, {HOST: {"slurmd_pam_adopt_node": "c1"}}, extra)
    assert run.returncode == 0, run.explain()
    assert (pam / "sshd").read_text() == SSHD
    assert not access.exists() and not (run_dir / "slurmd-c1.pid").exists()
    assert not (tmp_path / "spool" / "c1").exists()
