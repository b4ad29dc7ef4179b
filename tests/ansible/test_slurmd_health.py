"""roles/slurmd's health check files (its configure phase): the checker and this host's
expectations (its text in its bundle, byte for byte) installed, kept unchanged on a second run,
removed when the check is off; installed where slurm.conf and the checker look for them (the paths
cluster_cli/render/health_conf.py names).

The installed paths are private variables pointed into a temporary directory; the phase runs as
on a host without systemd and without pam_slurm_adopt, its other paths in that directory too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from role_runner import HOST, REPO, ansible_playbook, is_root, run_tasks

from cluster_cli.render.health_conf import HEALTH_CONFIG_PATH, HEALTH_PROGRAM_PATH, health_bundle

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
]

CHECKER = REPO / "roles" / "slurmd" / "files" / "cluster-cli-health"


def role_vars() -> dict[str, object]:
    return yaml.safe_load((REPO / "roles" / "slurmd" / "vars" / "main.yml").read_text(encoding="utf-8"))


def test_the_role_installs_where_slurm_conf_and_the_checker_look() -> None:
    variables = role_vars()
    assert variables["__slurmd_health_program"] == HEALTH_PROGRAM_PATH
    assert variables["__slurmd_health_config"] == HEALTH_CONFIG_PATH


@pytest.mark.skipif(not is_root(), reason="the tasks chown to root")
def test_installed_then_unchanged_then_removed_when_off(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    expectations = {"reason_prefix": "cluster-cli health:", "nodes": {"node1": {}}}
    text = json.dumps(expectations, indent=2) + "\n"
    # this host's text in its bundle, beside another host's
    (build / "health").mkdir()
    (build / health_bundle(HOST)).write_text(json.dumps({"other": "{}\n", HOST: text}), encoding="utf-8")
    program, config = tmp_path / "sbin" / "cluster-cli-health", tmp_path / "cluster-cli-health.json"
    program.parent.mkdir()
    variables: dict[str, object] = {
        "slurmd_health_config_src": str(build / "health"),
        "__slurmd_health_program": str(program),
        "__slurmd_health_config": str(config),
        "__slurmd_service_manager": "standalone",
        "slurmd_spool_dir": str(tmp_path / "spool"),
        "slurmd_nodes": [{"name": "node1"}],
        "__slurmd_pam_access_file": str(tmp_path / "access-slurm-adopt.conf"),
    }
    first = run_tasks(tmp_path / "first", "slurmd", ["configure"], variables)
    assert first.returncode == 0, first.explain()
    assert program.read_bytes() == CHECKER.read_bytes()
    assert (program.stat().st_mode & 0o7777, config.stat().st_mode & 0o7777) == (0o755, 0o644)
    assert config.read_text(encoding="utf-8") == text

    again = run_tasks(tmp_path / "again", "slurmd", ["configure"], variables)
    assert again.returncode == 0, again.explain()
    assert again.recap()["changed"] == 0

    off = run_tasks(tmp_path / "off", "slurmd", ["configure"], variables | {"slurmd_health_config_src": ""})
    assert off.returncode == 0, off.explain()
    assert not program.exists() and not config.exists()
    assert os.listdir(tmp_path / "sbin") == []
