"""roles/slurmd's health check files (its configure phase): the checker and this host's
expectations (its file made from the cluster's document, byte for byte the text plan expects)
installed, kept unchanged on a second run, removed when the check is off; installed where slurm.conf
and the checker look for them (the paths cluster_cli/render/health_conf.py names); a node the
document does not know fails the run, naming the node.

The installed paths are private variables pointed into a temporary directory; the phase runs as
on a host without systemd and without pam_slurm_adopt, its other paths in that directory too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from role_runner import REPO, ansible_playbook, is_root, run_tasks, slurmd_host_files

from cluster_cli.health_expectations import HostHealthTexts
from cluster_cli.render.health_conf import HEALTH_CONFIG_PATH, HEALTH_DOCUMENT, HEALTH_PROGRAM_PATH

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
def document(spool_dir: Path) -> dict[str, object]:
    """The cluster's expectations: this host's two nodes of two kinds, another host's node."""
    return {
        "check": {"reason_prefix": "cluster-cli health:", "min_free_mb": 1024, "mounts": ["/data"]},
        "conf_dir": "/etc/slurm", "configless": False, "spool_dir": str(spool_dir), "work_dir": "/srv/training",
        "kinds": [{"cpus": 2, "real_memory_mb": 2048, "gpus": 1, "gpu_devices": ["/dev/fake-gpu/nvidia0"]},
                  {"cpus": 4, "real_memory_mb": 1024, "gpus": 0, "gpu_devices": []}],
        "nodes": {"other1": 0, "node1": 0, "node2": 1},
    }


def health_variables(tmp_path: Path, build: Path) -> dict[str, object]:
    program, config = tmp_path / "sbin" / "cluster-cli-health", tmp_path / "cluster-cli-health.json"
    program.parent.mkdir(exist_ok=True)
    (tmp_path / "host").mkdir(exist_ok=True)
    return {
        **slurmd_host_files(tmp_path / "host"),
        "slurmd_health_config_src": str(build / "health"),
        "__slurmd_health_program": str(program),
        "__slurmd_health_config": str(config),
        "common_service_manager": "standalone",
        "slurmd_spool_dir": str(tmp_path / "spool"),
        "slurmd_nodes": [{"name": "node1"}, {"name": "node2"}],
        "__slurmd_pam_access_file": str(tmp_path / "access-slurm-adopt.conf"),
    }


def write_document(build: Path, expectations: dict[str, object]) -> None:
    (build / "health").mkdir(parents=True, exist_ok=True)
    (build / "health" / HEALTH_DOCUMENT).write_text(json.dumps(expectations, indent=2) + "\n", encoding="utf-8")


def test_installed_then_unchanged_then_removed_when_off(tmp_path: Path) -> None:
    build = tmp_path / "build"
    expectations = document(tmp_path / "spool")
    write_document(build, expectations)
    text = HostHealthTexts(expectations).text(["node1", "node2"])
    variables = health_variables(tmp_path, build)
    program, config = Path(str(variables["__slurmd_health_program"])), Path(str(variables["__slurmd_health_config"]))
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


def test_a_node_the_document_does_not_know_fails_the_run_naming_it(tmp_path: Path) -> None:
    build = tmp_path / "build"
    expectations = document(tmp_path / "spool")
    del expectations["nodes"]["node2"]  # type: ignore[attr-defined]
    write_document(build, expectations)
    variables = health_variables(tmp_path, build)
    run = run_tasks(tmp_path / "run", "slurmd", ["configure"], variables)
    assert run.returncode != 0
    assert "the health check's expectations have no node 'node2': render again" in run.text, run.explain()
    assert not Path(str(variables["__slurmd_health_config"])).exists()
