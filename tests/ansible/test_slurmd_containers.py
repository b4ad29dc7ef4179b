"""roles/slurmd's container start program (its configure phase): installed where containers are on
(`slurmd_containers`), byte for byte files/cluster-cli-oci-run and executable, kept on a second run,
removed when containers are turned off. The role's host files are pointed into a temporary
directory; the phase runs as on a host without systemd, pam_slurm_adopt or the health check.
Also: every host file the role's vars name is one that role tests point away from the machine's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from role_runner import REPO, SLURMD_HOST_FILES, ansible_playbook, is_root, run_tasks, slurmd_host_files

PROGRAM = REPO / "roles" / "slurmd" / "files" / "cluster-cli-oci-run"


def test_role_tests_can_point_every_host_file_of_the_role_away() -> None:
    """A host file added to roles/slurmd's vars without a place in role_runner.SLURMD_HOST_FILES
    would be written or removed on the machine that runs the tests."""
    role_vars = yaml.safe_load((REPO / "roles" / "slurmd" / "vars" / "main.yml").read_text(encoding="utf-8"))
    files = {name for name, value in role_vars.items()
             if isinstance(value, str) and value.startswith("/") and not value.endswith("/")
             and name.endswith(("_file", "_program", "_config", "_path"))}
    assert files == set(SLURMD_HOST_FILES)


@pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")
@pytest.mark.skipif(not is_root(), reason="the tasks chown to root")
def test_installed_then_unchanged_then_removed_when_containers_are_off(tmp_path: Path) -> None:
    (tmp_path / "host").mkdir()
    variables = {
        **slurmd_host_files(tmp_path / "host"),
        "slurmd_containers": True,
        "common_service_manager": "standalone",
        "slurmd_spool_dir": str(tmp_path / "spool"),
        "slurmd_nodes": [{"name": "node1"}],
    }
    program = Path(variables["__slurmd_oci_run_program"])
    first = run_tasks(tmp_path / "first", "slurmd", ["configure"], variables)
    assert first.returncode == 0, first.explain()
    assert program.read_bytes() == PROGRAM.read_bytes()
    assert program.stat().st_mode & 0o7777 == 0o755

    again = run_tasks(tmp_path / "again", "slurmd", ["configure"], variables)
    assert again.returncode == 0, again.explain()
    assert again.recap()["changed"] == 0

    off = run_tasks(tmp_path / "off", "slurmd", ["configure"], variables | {"slurmd_containers": False})
    assert off.returncode == 0, off.explain()
    assert not program.exists()
