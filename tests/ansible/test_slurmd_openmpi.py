"""roles/slurmd's line in Open MPI's parameter file (its configure phase): where the host runs several
slurmd and the role installs Open MPI, `btl = self,tcp` after Debian's own lines (two nodes' ranks of
one step would share Open MPI's shared-memory segments there: a segfault); kept on a second run,
taken out where the host runs one slurmd, never added where MPI is off. Debian's lines stay.

The file is a private variable pointed into a temporary directory; the phase runs as on a host
without systemd, without pam_slurm_adopt and without the health check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from role_runner import ansible_playbook, is_root, run_tasks, slurmd_host_files

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="the tasks chown to root"),
]

# Debian 12's openmpi-bin ships these (comments and blank lines between them).
DEBIAN = "# Exclude openib\n\nbtl_base_warn_component_unused=0\nmtl = ^ofi\nbtl = ^uct,openib,ofi\n\npml = ^ucx\n"
BLOCK = "# BEGIN cluster-cli: several slurmd on this host\nbtl = self,tcp\n# END cluster-cli: several slurmd on this host\n"
MPI = ["libpmix-dev", "openmpi-bin"]


def _configure(tmp_path: Path, name: str, params: Path, nodes: int, packages: list[str]) -> int:
    """Run the configure phase; the number of changed tasks."""
    (tmp_path / "host").mkdir(exist_ok=True)
    variables = {
        **slurmd_host_files(tmp_path / "host"),
        "common_service_manager": "standalone",
        "slurmd_spool_dir": str(tmp_path / "spool"),
        "slurmd_nodes": [{"name": f"node{index}"} for index in range(1, nodes + 1)],
        "slurmd_mpi_packages": packages,
        "__slurmd_pam_access_file": str(tmp_path / "access-slurm-adopt.conf"),
        "__slurmd_openmpi_params_file": str(params),
    }
    run = run_tasks(tmp_path / name, "slurmd", ["configure"], variables)
    assert run.returncode == 0, run.explain()
    return run.recap()["changed"]


def test_tcp_only_on_a_host_of_several_slurmd_and_taken_out_again(tmp_path: Path) -> None:
    params = tmp_path / "openmpi-mca-params.conf"
    params.write_text(DEBIAN)
    assert _configure(tmp_path, "first", params, 2, MPI) > 0
    assert params.read_text() == DEBIAN + BLOCK  # last: Open MPI takes the file's last btl line
    assert _configure(tmp_path, "again", params, 2, MPI) == 0
    _configure(tmp_path, "one-slurmd", params, 1, MPI)
    assert params.read_text() == DEBIAN


def test_nothing_where_mpi_is_off(tmp_path: Path) -> None:
    params = tmp_path / "openmpi-mca-params.conf"
    params.write_text(DEBIAN)
    _configure(tmp_path, "off", params, 2, [])
    assert params.read_text() == DEBIAN
