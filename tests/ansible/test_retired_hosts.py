"""site.yml's play for hosts that left the inventory, run for real through cluster-cli's runner.

A host that left the inventory may be a machine that is gone: deploy must not fail on it, but say
it was left alone. Here it is an address nothing listens on; no root needed, nothing is changed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from role_runner import REPO, ansible_playbook

from cluster_cli.ansible.runner import PlaybookOptions, run_playbook

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

GONE = {"ansible_host": "127.0.0.1", "ansible_port": 9, "ansible_user": "root",
        "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no", "slurmd_nodes": []}


def _inventories(tmp_path: Path) -> list[Path]:
    cluster = {"all": {"children": {"cluster": {
        "hosts": {"here": {"ansible_connection": "local"}},
        "children": {"slurm_controller": {"hosts": {"here": None}}, "slurm_compute": {"hosts": {"here": None}}},
    }}}}
    retired = {"all": {"children": {"slurm_retired": {"hosts": {"gone": GONE}}}}}
    paths = [tmp_path / "inventory.yml", tmp_path / "retired.yml"]
    for path, document in zip(paths, (cluster, retired)):
        path.write_text(json.dumps(document))
    return paths


def test_an_unreachable_host_that_left_the_inventory_is_reported_and_does_not_fail_the_deploy(
        tmp_path: Path) -> None:
    result = run_playbook(REPO / "playbooks" / "site.yml", _inventories(tmp_path), [],
                          tmp_path / "deploy.log", PlaybookOptions(limit="gone"))
    log = (tmp_path / "deploy.log").read_text()
    assert result.ok, log[-3000:]
    assert [(missed.host, missed.unreachable) for missed in result.missed] == [("gone", True)]
    assert "Stop slurmd where no node of the inventory runs" in log
    # the host was left after the first task that could not reach it
    assert "Stop the slurmd instances of the host" not in log.split("Leave a host that left")[-1]


def test_an_unreachable_cluster_host_still_fails(tmp_path: Path) -> None:
    inventories = _inventories(tmp_path)
    document = json.loads(inventories[0].read_text())
    document["all"]["children"]["cluster"]["hosts"]["here"] = GONE
    inventories[0].write_text(json.dumps(document))
    result = run_playbook(REPO / "playbooks" / "site.yml", inventories[:1], [],
                          tmp_path / "deploy.log", PlaybookOptions(limit="here", tags="preflight"))
    assert not result.ok and [(f.host, f.unreachable) for f in result.failures] == [("here", True)]
    assert result.missed == []
