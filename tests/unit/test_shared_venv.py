"""The training environment on shared storage (cluster_cli/shared_venv.py): which hosts share it,
as roles/training_env receives them (training_env_shared_hosts) and as the play that checks it
selects them (the training_env_shared group); on local disks, none."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, load

from cluster_cli.render.ansible_inventory import inventory_document
from cluster_cli.shared_venv import shared_venv_notes, sharing_hosts, venv_mount

TRAINING_HOSTS = ["head", "gpu1", "gpu2", "gpu3", "gpu4", "box"]  # login head; compute gpu[1-4] and box (dev)


def _with_mount(path: str, kind: str = "nfs4", hosts: str = "[login, compute]", source: str = "nfs1:/export/opt") -> str:
    return BASE + f"storage:\n  mounts:\n    - {{source: {source}, path: {path}, type: {kind}, hosts: {hosts}}}\n"


@pytest.mark.parametrize("path", ["/opt/cluster-training", "/opt/cluster-training/venv", "/opt"])
def test_an_environment_at_or_below_a_shared_mount_is_shared_by_every_training_host_that_mounts_it(path: str) -> None:
    cluster = load(_with_mount(path))
    assert venv_mount(cluster.inventory) is not None
    assert sharing_hosts(cluster) == TRAINING_HOSTS
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    assert list(children["training_env_shared"]["hosts"]) == TRAINING_HOSTS


def test_only_the_hosts_that_mount_it_share_it() -> None:
    assert sharing_hosts(load(_with_mount("/opt/cluster-training", hosts="[gpu]"))) == ["gpu1", "gpu2", "gpu3", "gpu4"]


@pytest.mark.parametrize(("path", "kind", "hosts", "source"), [
    ("/shared", "nfs4", "[login, compute]", "nfs1:/export/opt"),  # the environment is not on it
    ("/opt/cluster-training/venv2", "nfs4", "[login, compute]", "nfs1:/export/opt"),  # a sibling, not a parent
    ("/opt/cluster-training", "tmpfs", "[login, compute]", "tmpfs"),  # each host's own memory
    ("/opt/cluster-training", "nfs4", "[dev]", "nfs1:/export/opt"),  # one host mounts it: nothing to share
])
def test_elsewhere_every_host_installs_its_own(path: str, kind: str, hosts: str, source: str) -> None:
    cluster = load(_with_mount(path, kind, hosts, source))
    assert sharing_hosts(cluster) == []
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    assert children["training_env_shared"] == {"hosts": {}}


def test_without_storage_nothing_is_shared() -> None:
    cluster = load(BASE)
    assert venv_mount(cluster.inventory) is None and sharing_hosts(cluster) == []


def test_plan_says_the_environment_is_installed_once_and_where() -> None:
    cluster = load(_with_mount("/opt/cluster-training", hosts="[gpu]"))
    assert shared_venv_notes(cluster) == [
        "training environment /opt/cluster-training/venv is on shared storage (nfs1:/export/opt at "
        "/opt/cluster-training): a deploy installs it once, from the first of gpu1, gpu2, gpu3, gpu4 it runs on, "
        "and the others only check it"
    ]
    assert shared_venv_notes(load(BASE)) == []


def test_the_nfs_server_of_its_own_export_shares_the_environment_it_holds() -> None:
    """head, a login host, serves /shared and mounts nothing of its own: it sees the clients'
    /shared/venv on its disk, so it is one of the sharing hosts (the first: it installs, unsquashed),
    not a host that installs a second copy into the same directory beside them."""
    cluster = load(BASE + "storage:\n  nfs_server:\n    host: head\ntraining:\n  venv_path: /shared/venv\n")
    assert sharing_hosts(cluster) == TRAINING_HOSTS
    # a declared mount from a cluster host's other directory: the host's own copy is elsewhere
    declared = load(_with_mount("/opt/cluster-training", source="head:/export/opt"))
    assert "head" not in sharing_hosts(declared)
