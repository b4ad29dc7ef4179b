"""The cluster's shared file system (storage.mounts, roles/storage_client) on real systemd hosts.

With CLUSTER_TB_STORAGE=1 the default scenario's bed shares nothing itself: login, c1 and c2 get
/dev/fuse, ctl holds the export directory (molecule/shared/tasks/storage.yml), and the inventory's one
``fuse.sshfs`` mount at ``training.work_dir`` is the only way a file a job writes on one node reaches
another. Skipped without it.
"""

from __future__ import annotations

import json
import os
import shlex
import uuid

import pytest
from conftest import ClusterView

from cluster_cli.model import Mount
from cluster_cli.paths import cluster_state_dir
from cluster_cli.render.mount_units import unit_name
from cluster_cli.shared_venv import sharing_hosts

pytestmark = pytest.mark.skipif(
    os.environ.get("CLUSTER_TB_STORAGE", "") not in ("1", "true", "yes"),
    reason="no shared storage on this bed: set CLUSTER_TB_STORAGE=1 (default scenario, molecule/shared/tasks/storage.yml)",
)


def _mounts(view: ClusterView) -> list[Mount]:
    storage = view.cluster.inventory.storage
    assert storage is not None and len(storage.mounts) == 2, "the bed's inventory declares two storage mounts"
    return storage.mounts


def _mount(view: ClusterView) -> Mount:
    """The work area's: the smoke jobs' work_dir."""
    return next(mount for mount in _mounts(view) if mount.path == view.cluster.inventory.training.work_dir)


def _mounting_hosts(view: ClusterView) -> list[str]:
    return [host for host in view.hosts if view.cluster.hosts[host].roles & {"login", "compute"}]


def _job(view: ClusterView, node: str, command: str) -> str:
    """``command`` run by the test user in a one-task job on ``node``, submitted from the login host."""
    user = view.cluster.inventory.training.test_user
    return view.slurm(f"cd / && runuser -u {user} -- timeout 120 srun -N1 -w {node} --chdir=/tmp --mem=64 "
                      f"sh -c {shlex.quote(command)}")


def test_the_mounts_are_active_and_enabled_where_the_inventory_puts_them(view: ClusterView) -> None:
    mounts = sorted(_mounts(view), key=lambda mount: mount.path)
    assert all(mount.type == "fuse.sshfs" for mount in mounts)
    expected = "".join(f"{mount.path} {mount.source} fuse.sshfs\n" for mount in mounts)
    units = " ".join(shlex.quote(unit_name(mount)) for mount in mounts)
    found = {}
    for host in view.hosts:
        found[host] = view.run(host, f"findmnt -rn -t fuse.sshfs -o TARGET,SOURCE,FSTYPE | sort; "
                                     f"systemctl is-active {units}; systemctl is-enabled {units}; "
                                     f"for unit in {units}; do systemctl show -P WantedBy $unit; done",
                               check=False).stdout
    wanted = {host: expected + "active\nactive\nenabled\nenabled\nremote-fs.target\nremote-fs.target\n"
              for host in _mounting_hosts(view)}
    assert {host: found[host] for host in wanted} == wanted
    assert all(not found[host].startswith("/") for host in set(view.hosts) - set(wanted)), \
        f"only login and compute hosts mount them: {found}"


def test_the_training_environment_was_installed_once_into_the_shared_mount(view: ClusterView) -> None:
    """roles/training_env on a shared mount (cluster_cli/shared_venv.py): in the converge's deploy
    (the first deploy log) the environment was made and pip ran on one host, skipped on the others,
    and each checked it afterwards; every host runs its torch from the server's one copy."""
    training = view.cluster.inventory.training
    sharing = sharing_hosts(view.cluster)
    assert sorted(sharing) == sorted(_mounting_hosts(view))
    # the converge's deploy: the latest that created the environment (the state directory keeps the
    # logs of earlier beds of the same name, and the deploys of verify find it made)
    logs = sorted((cluster_state_dir(view.cluster.name) / "logs").glob("site-*.log"), reverse=True)
    first_deploy = next(text for text in (log.read_text() for log in logs) if "changed" in _statuses(text, CREATE).values())
    created = _statuses(first_deploy, CREATE)
    pip = _statuses(first_deploy, "Install the pinned packages")
    checked = _statuses(first_deploy, "Check that the shared training environment has every pin")
    installer = [host for host, status in pip.items() if status == "changed"]
    assert len(installer) == 1 and created[installer[0]] == "changed", (created, pip)
    assert {host: status for host, status in pip.items() if host not in installer} == \
        {host: "skipping" for host in sharing if host not in installer}, pip
    assert checked == {host: "ok" for host in sharing}, checked
    mount = next(mount for mount in _mounts(view) if mount.path != training.work_dir)
    probe = f"findmnt -rn -o SOURCE -T {training.venv_path}; {training.venv_path}/bin/python -c 'import torch; print(torch.__version__)'"
    for host in sharing:
        source, version = view.run(host, probe).stdout.split()
        assert source == mount.source and version.split("+")[0] == training.torch_version, (host, source, version)


CREATE = "Create the virtual environment where it is missing"


def _statuses(log: str, task: str) -> dict[str, str]:
    """Each host's status under the first task whose name starts with ``task`` in an Ansible log."""
    parts = log.split(f"TASK [training_env : {task}", 1)
    if len(parts) == 1:
        return {}
    section = parts[1].split("\n\n", 1)[0]
    return {line.split("[", 1)[1].split("]", 1)[0]: line.split(":", 1)[0]
            for line in section.splitlines()[1:] if line.split(":", 1)[0] in ("ok", "changed", "skipping", "fatal")}


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


def _health(view: ClusterView) -> tuple[int, dict[str, dict]]:
    done = view.cli("health", str(view.inventory_path), "--json", check=False)
    return done.returncode, {entry["node"]: entry for entry in json.loads(done.stdout)["nodes"]}


def test_a_dead_mount_drains_its_node_with_the_evidence_and_the_remount_resumes_it(view: ClusterView) -> None:
    """The node health check on the product's own mount: the work area's sshfs killed on a compute
    host leaves a dead mount there ("Transport endpoint is not connected"); `cluster-cli health` drains
    that node, naming the mount, and no other; the mount unit restarted, the next check resumes it."""
    mount = _mount(view)
    host = view.compute[0]
    node = view.cluster.hosts[host].slurmd_nodes[0].name
    view.wait_nodes_idle()
    # the source names the sshfs process of this mount only (its ssh child has the server, not the
    # export); "[s]moke@...": the pattern does not match the shell that runs pkill
    pattern = f"[{mount.source[0]}]{mount.source[1:]}( |$)"
    view.run(host, f"pkill -KILL -f {shlex.quote(pattern)}")
    try:
        code, verdicts = _health(view)
        failed = {name: verdict for name, verdict in verdicts.items() if not verdict["passed"]}
        assert code != 0 and list(failed) == [node], verdicts
        assert failed[node]["action"] == "drain" and any(mount.path in line for line in failed[node]["evidence"]), failed
        state, reason = view.node_state(node)
        assert reason.startswith("cluster-cli health") and mount.path in reason, (state, reason)
    finally:
        view.run(host, f"systemctl restart {shlex.quote(unit_name(mount))}")
    code, verdicts = _health(view)
    assert code == 0 and verdicts[node]["passed"] and verdicts[node]["action"] == "resume", verdicts
    assert view.node_state(node) == ("idle", "none")
