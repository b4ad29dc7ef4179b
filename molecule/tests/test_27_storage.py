"""The cluster's shared file system (storage.mounts, roles/storage_client) on real systemd hosts.

With CLUSTER_TB_STORAGE=1 the default scenario's bed shares nothing itself: login, c1 and c2 get
/dev/fuse, ctl holds the export directory (molecule/shared/tasks/storage.yml), and the inventory's one
``fuse.sshfs`` mount at ``training.work_dir`` is the only way a file a job writes on one node reaches
another. Skipped without it.
"""

from __future__ import annotations

import os
import shlex
import uuid

import pytest
from conftest import ClusterView

from cluster_cli.model import Mount

pytestmark = pytest.mark.skipif(
    os.environ.get("CLUSTER_TB_STORAGE", "") not in ("1", "true", "yes"),
    reason="no shared storage on this bed: set CLUSTER_TB_STORAGE=1 (default scenario, molecule/shared/tasks/storage.yml)",
)


def _mount(view: ClusterView) -> Mount:
    storage = view.cluster.inventory.storage
    assert storage is not None and len(storage.mounts) == 1, "the bed's inventory declares one storage mount"
    return storage.mounts[0]


def _mounting_hosts(view: ClusterView) -> list[str]:
    return [host for host in view.hosts if view.cluster.hosts[host].roles & {"login", "compute"}]


def _job(view: ClusterView, node: str, command: str) -> str:
    """``command`` run by the test user in a one-task job on ``node``, submitted from the login host."""
    user = view.cluster.inventory.training.test_user
    return view.slurm(f"cd / && runuser -u {user} -- timeout 120 srun -N1 -w {node} --chdir=/tmp --mem=64 "
                      f"sh -c {shlex.quote(command)}")


def test_the_mount_is_active_and_enabled_where_the_inventory_puts_it(view: ClusterView) -> None:
    mount = _mount(view)
    assert mount.type == "fuse.sshfs" and mount.path == view.cluster.inventory.training.work_dir
    expected = f"{mount.path} {mount.source} fuse.sshfs\n"
    found = {}
    for host in view.hosts:
        unit = shlex.quote(view.run(host, f"systemd-escape --path --suffix=mount {mount.path}").stdout.strip())
        found[host] = view.run(host, f"findmnt -rn -t fuse.sshfs -o TARGET,SOURCE,FSTYPE; systemctl is-active {unit}; "
                                     f"systemctl is-enabled {unit}; systemctl show -P WantedBy {unit}",
                               check=False).stdout
    wanted = {host: expected + "active\nenabled\nremote-fs.target\n" for host in _mounting_hosts(view)}
    assert {host: found[host] for host in wanted} == wanted
    assert all(not found[host].startswith("/") for host in set(view.hosts) - set(wanted)), \
        f"only login and compute hosts mount it: {found}"


def test_a_file_a_job_writes_on_one_node_is_read_on_the_other_and_on_the_server(view: ClusterView) -> None:
    mount = _mount(view)
    server, export = mount.source.split("@", 1)[1].split(":", 1)
    first, second = view.nodes[:2]
    name = f"tb-storage-{uuid.uuid4().hex}"
    token = uuid.uuid4().hex
    _job(view, first, f"echo {token} > {mount.path}/{name}")
    assert _job(view, second, f"cat {mount.path}/{name}") == token
    user = view.cluster.inventory.training.test_user
    on_server = view.run(server, f"stat -c '%U' {export}/{name} && cat {export}/{name}").stdout.split()
    assert on_server == [user, token], "the server holds the file, the test user's"
    view.run(server, f"rm -f {export}/{name}")


def test_other_users_are_held_to_the_files_modes(view: ClusterView) -> None:
    """default_permissions: the kernel checks each local user against the files' owners and modes.
    Without it, sshfs would let every user do what the test user's SFTP login may."""
    mount = _mount(view)
    other = view.cluster.inventory.people.users[0].name
    done = view.run(view.submit, f"runuser -u {other} -- touch {mount.path}/tb-storage-intruder", check=False)
    assert done.rc != 0 and "Permission denied" in done.stderr, (done.rc, done.stdout, done.stderr)


def test_the_mount_comes_back_when_a_compute_host_boots(view: ClusterView) -> None:
    mount = _mount(view)
    host = view.compute[-1]
    node = view.cluster.hosts[host].slurmd_nodes[0].name
    name = f"tb-storage-{uuid.uuid4().hex}"
    token = uuid.uuid4().hex
    _job(view, view.cluster.hosts[view.compute[0]].slurmd_nodes[0].name, f"echo {token} > {mount.path}/{name}")
    view.bed.restart(host)
    view.wait_until(f"{node} is idle again", lambda: view.node_state(node) == ("idle", "none"), timeout=120)
    assert _job(view, node, f"findmnt -rn -o FSTYPE {mount.path}; cat {mount.path}/{name}").split() == \
        ["fuse.sshfs", token]
