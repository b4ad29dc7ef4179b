"""Shared file systems (storage.mounts): every refusal at its file:line, the units as rendered
(names escaped as systemd-escape --path escapes them, options, targets, automount), the hosts each
mount reaches (Ansible groups), roles/storage_client's variables, and plan's and the bundle's rows."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from unit_helpers import BASE, expected_problems, load, problems

from cluster_cli.ansible.variables import storage_variables
from cluster_cli.bundle.packages import debian_packages
from cluster_cli.host_files import files_by_host
from cluster_cli.plan import Impact, stale_mount_changes
from cluster_cli.probe import HostProbe, agent
from cluster_cli.render.ansible_inventory import inventory_document
from cluster_cli.render.health_conf import health_document
from cluster_cli.render.mount_units import escape_path, unescape_path, fstab_line, render_mount_units
from cluster_cli.shared_storage import mount_options

MOUNTS = """storage:
  mounts:
    - source: nfs1:/export/home
      path: /home
    - source: nfs1:/export/shared
      path: /shared/work-1
      type: nfs4
      hosts: [login, gpu]
      owner: root
      mode: "0755"
      automount: true
    - source: fs.example.test:/data
      path: /data
      type: fuse.sshfs
      hosts: [compute]
"""


def storage(extra: str = MOUNTS) -> str:
    return BASE + extra


ESCAPES = ["/shared/work-1", "/", "/home", "//a//b/", "/a b", "/.hidden/x", "/a/.b", "/a-b/c_d:e.f", "/ü/é", "/x\\y"]


@pytest.mark.parametrize("path", ESCAPES)
def test_unit_names_are_escaped_as_systemd_escape_does(path: str) -> None:
    normal = "/" + "/".join(part for part in path.split("/") if part)
    assert unescape_path(escape_path(path)) == normal
    known = {"/shared/work-1": "shared-work\\x2d1", "/": "-", "/home": "home"}
    if path in known:
        assert escape_path(path) == known[path]
    if shutil.which("systemd-escape"):
        assert escape_path(path) == subprocess.run(["systemd-escape", "--path", path], capture_output=True, text=True,
                                                   check=True).stdout.strip()


def test_units_hold_what_where_type_options_and_the_remote_fs_target() -> None:
    files = render_mount_units(load(storage()))
    assert sorted(files) == ["storage/data.mount", "storage/home.mount", "storage/shared-work\\x2d1.automount",
                             "storage/shared-work\\x2d1.mount"]
    home = files["storage/home.mount"].splitlines()
    assert {"# cluster-cli storage.mounts", "[Mount]", "What=nfs1:/export/home", "Where=/home", "Type=nfs",
            "Options=_netdev,nofail,hard", "[Install]", "WantedBy=remote-fs.target"} <= set(home)
    work = files["storage/shared-work\\x2d1.mount"]
    # the automount starts it on first access: no [Install] of its own
    assert "Type=nfs4" in work and "[Install]" not in work
    assert {"[Automount]", "Where=/shared/work-1", "WantedBy=remote-fs.target"} <= set(
        files["storage/shared-work\\x2d1.automount"].splitlines())
    data = files["storage/data.mount"]
    assert "Options=_netdev,nofail,allow_other,default_permissions,reconnect,ServerAliveInterval=15,ServerAliveCountMax=3" in data


def test_given_options_replace_the_defaults_and_a_local_type_is_wanted_by_local_fs() -> None:
    text = storage("storage:\n  mounts:\n    - {source: tmpfs, path: /scratch, type: tmpfs, options: [size=10g, mode=1777]}\n")
    cluster = load(text)
    [mount] = cluster.inventory.storage.mounts
    assert mount_options(mount) == ["size=10g", "mode=1777"]
    assert "WantedBy=local-fs.target" in render_mount_units(cluster)["storage/scratch.mount"]
    assert fstab_line(mount) == "tmpfs /scratch tmpfs size=10g,mode=1777 0 0"
    assert "%%" in render_mount_units(load(text.replace("source: tmpfs", "source: a%b")))["storage/scratch.mount"]


def test_each_mount_reaches_its_hosts_through_a_group() -> None:
    children = inventory_document(load(storage()))["all"]["children"]["cluster"]["children"]
    everyone = ["head", "gpu1", "gpu2", "gpu3", "gpu4", "box"]
    assert list(children["storage_client"]["hosts"]) == everyone
    assert list(children["storage_mount_0"]["hosts"]) == everyone
    assert list(children["storage_mount_1"]["hosts"]) == ["head", "gpu1", "gpu2", "gpu3", "gpu4"]
    assert list(children["storage_mount_2"]["hosts"]) == ["gpu1", "gpu2", "gpu3", "gpu4", "box"]


def test_no_storage_renders_nothing_and_runs_no_task() -> None:
    cluster = load(BASE)
    assert render_mount_units(cluster) == {}
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    assert children["storage_client"] == {"hosts": {}}
    assert not [name for name in children if name.startswith("storage_mount_")]
    assert storage_variables(cluster, Path("/b"))["storage_client_mounts"] == []


def test_role_variables_name_units_packages_and_fstab_lines() -> None:
    variables = storage_variables(load(storage()), Path("/build"))
    assert variables["storage_client_units_src"] == "/build/storage"
    home, work, data = variables["storage_client_mounts"]
    assert home == {"path": "/home", "hosts_group": "storage_mount_0", "unit": "home.mount", "automount_unit": "",
                    "packages": ["nfs-common"], "fstab": "nfs1:/export/home /home nfs _netdev,nofail,hard 0 0",
                    "owner": "root", "group": "root", "mode": "0755"}
    assert work["automount_unit"] == "shared-work\\x2d1.automount"
    assert data["packages"] == ["sshfs"]


@pytest.mark.parametrize(("path", "message"), [
    ("/", "/ is the root file system: mount a shared file system at a directory of its own (e.g. /shared)"),
    ("/usr/local/share", "/usr/local/share is inside the system directory /usr: a mount there would hide the host's own files"),
    ("/etc", "/etc is inside the system directory /etc: a mount there would hide the host's own files"),
    ("/var/lib/slurm/slurmd/x", "/var/lib/slurm/slurmd/x is inside the system directory /var: a mount there would hide the host's own files"),
    ("/lib64", "/lib64 is inside the system directory /lib64: a mount there would hide the host's own files"),
    ("/run/user/1000", "/run/user/1000 is inside the system directory /run: a mount there would hide the host's own files"),
])
def test_a_mount_point_in_a_system_directory_is_refused_at_its_line(path: str, message: str) -> None:
    text = storage(f"storage:\n  mounts:\n    - source: nfs1:/export\n      path: {path}\n")
    assert problems(text) == expected_problems(text, [(f"path: {path}$", "storage.mounts[0].path", message)])


def test_slurms_own_directories_are_refused_and_the_state_directory_itself_is_not() -> None:
    paths = "slurm:\n  paths:\n    spool_dir: /data/slurm/spool\n    state_dir: /ha/state\n"
    text = storage(paths + "storage:\n  mounts:\n    - {source: 'n:/a', path: /data}\n    - {source: 'n:/b', path: /ha/state/x}\n"
                   "    - {source: 'n:/c', path: /ha/state}\n")
    assert problems(text) == expected_problems(text, [
        ("path: /data}", "storage.mounts[0].path",
         "/data would hold or hide slurm.paths.spool_dir /data/slurm/spool, which each host keeps on its own disk"),
        ("path: /ha/state/x}", "storage.mounts[1].path",
         "/ha/state/x is inside slurm.paths.state_dir /ha/state: mount the state directory itself, or elsewhere"),
    ])


def test_two_mounts_on_one_path_and_a_mount_inside_another_are_refused() -> None:
    text = storage("storage:\n  mounts:\n    - {source: 'n:/a', path: /shared}\n    - {source: 'n:/b', path: /shared/}\n"
                   "    - {source: 'n:/c', path: /shared/inner}\n")
    assert problems(text) == expected_problems(text, [
        ("path: /shared/}", "storage.mounts[1].path", "/shared is mounted by storage.mounts[0] already"),
        ("path: /shared/inner}", "storage.mounts[2].path",
         "/shared/inner is inside /shared, the mount point of storage.mounts[0]: a mount over another hides it "
         "until the outer one is mounted; give it a path of its own"),
    ])


def test_selectors_naming_nothing_or_no_host_are_refused() -> None:
    text = storage("storage:\n  mounts:\n    - source: n:/a\n      path: /a\n      hosts: [login, nosuch]\n"
                   "    - source: n:/b\n      path: /b\n      hosts: [monitoring]\n")
    assert problems(text) == expected_problems(text, [
        ("hosts: [login, nosuch]", "storage.mounts[0].hosts[1]",
         "'nosuch' is neither a role nor a node group (controllers, database, login, compute, monitoring, dev, gpu)"),
        ("hosts: [monitoring]", "storage.mounts[1].hosts", "selects no host: monitoring has none in this inventory"),
    ])


def test_a_node_group_named_like_a_role_is_ambiguous() -> None:
    text = storage("storage:\n  mounts:\n    - {source: 'n:/a', path: /a, hosts: [login]}\n").replace("name: dev", "name: login")
    text = text.replace("nodes: [gpu, dev]", "nodes: [gpu, login]")
    assert problems(text) == expected_problems(text, [
        ("hosts: [login]", "storage.mounts[0].hosts[0]", "'login' is both a role and a node group's name: rename the group"),
    ])


def test_a_type_without_an_installable_client_is_refused_unless_the_site_installs_it() -> None:
    text = storage("storage:\n  mounts:\n    - source: mgs@tcp:/lfs\n      path: /lustre\n      type: lustre\n")
    assert problems(text) == expected_problems(text, [
        ("type: lustre", "storage.mounts[0].type",
         "this release cannot install a client for 'lustre' (it installs one for nfs, nfs4, fuse.sshfs, cephfs, "
         "glusterfs): install it on the hosts yourself and set client_installed: true"),
    ])
    installed = text + "      client_installed: true\n"
    assert problems(installed) == []
    assert "lustre" not in " ".join(debian_packages(load(installed)))


@pytest.mark.parametrize(("kind", "source", "message"), [
    ("nfs", "nfs1/export", "'nfs1/export' is not an NFS export: SERVER:/PATH (e.g. nfs1:/export/home)"),
    ("nfs4", "nfs1:export", "'nfs1:export' is not an NFS export: SERVER:/PATH (e.g. nfs1:/export/home)"),
    ("fuse.sshfs", "/just/a/path", "'/just/a/path' is not an sshfs source: [USER@]HOST:[PATH]"),
])
def test_a_source_its_type_cannot_mount_is_refused(kind: str, source: str, message: str) -> None:
    text = storage(f"storage:\n  mounts:\n    - source: {source}\n      path: /a\n      type: {kind}\n")
    assert problems(text) == expected_problems(text, [(f"source: {source}", "storage.mounts[0].source", message)])


def test_field_errors_of_the_model_are_at_their_lines() -> None:
    text = storage("storage:\n  mounts:\n    - source: n:/a\n      path: relative\n      options: ['a,b']\n"
                   "      mode: '999'\n      colour: red\n      hosts: []\n    - {source: 'a b', path: /x}\n")
    assert problems(text) == expected_problems(text, [
        ("path: relative", "storage.mounts[0].path", "'relative' is not an absolute path"),
        ("options: ['a,b']", "storage.mounts[0].options[0]", "String should match pattern '^[^\\s,]+$'"),
        ("mode: '999'", "storage.mounts[0].mode", "String should match pattern '^0?[0-7]{3}$'"),
        ("colour: red", "storage.mounts[0].colour", "unknown field; known fields: automount, client_installed, group, "
                                                    "hosts, mode, options, owner, path, source, type"),
        ("hosts: []", "storage.mounts[0].hosts", "List should have at least 1 item after validation, not 0"),
        ("source: 'a b'", "storage.mounts[1].source", "'a b': cannot hold white space or control characters"),
    ])


def test_plan_compares_each_hosts_units_and_wants_their_clients() -> None:
    cluster = load(storage())
    rendered = render_mount_units(cluster)
    by_host = files_by_host(cluster, rendered, b"k" * 32)
    units = {name: sorted(item.path for item in files if item.path.startswith("/etc/systemd/system/"))
             for name, files in by_host.items()}
    assert units["head"] == ["/etc/systemd/system/home.mount", "/etc/systemd/system/shared-work\\x2d1.automount",
                             "/etc/systemd/system/shared-work\\x2d1.mount"]
    assert units["box"] == ["/etc/systemd/system/data.mount", "/etc/systemd/system/home.mount"]
    assert {"nfs-common", "sshfs"} <= set(debian_packages(cluster))
    assert not {"nfs-common", "sshfs"} & set(debian_packages(load(BASE)))


def test_plan_says_why_a_removed_mount_waits() -> None:
    probe = HostProbe("gpu1", unmounted=["/home"], stale_mounts=[
        {"unit": "old.mount", "path": "/old", "mounted": True, "users": [41, 42]},
        {"unit": "free.mount", "path": "/free", "mounted": True, "users": []},
        {"unit": "gone.mount", "path": "/gone", "mounted": False, "users": []},
    ])
    rows = {change.subject: change for change in stale_mount_changes("gpu1", probe)}
    assert rows["/etc/systemd/system/old.mount"].detail == (
        "/old is no longer in storage.mounts, but processes use it (pids 41, 42): waits, the deploy leaves it "
        "mounted until nothing uses it")
    assert rows["/etc/systemd/system/free.mount"].detail == "/free is no longer in storage.mounts: unmount it and remove the unit"
    assert rows["/etc/systemd/system/gone.mount"].detail == "/gone is no longer in storage.mounts: remove the unit (not mounted)"
    assert rows["/home"].impact is Impact.START and rows["/home"].detail == "not mounted: mount"
    assert {rows[name].impact for name in rows if name.startswith("/etc/")} == {Impact.FILE}


SHM = "/dev/shm"


def _unit(directory: Path, name: str, where: str, marker: bool = True) -> None:
    (directory / name).write_text(("# cluster-cli storage.mounts\n" if marker else "") + f"[Mount]\nWhere={where}\n")


def _working_directory(pid: int) -> str:
    """``pid``'s working directory as /proc shows it to this process, or why it does not."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError as error:
        return f"unreadable: {error}"


@pytest.mark.skipif(subprocess.run(["findmnt", "--mountpoint", SHM], capture_output=True, check=False).returncode != 0,
                    reason=f"{SHM} is not a mount here")
def test_the_probe_finds_stale_units_and_what_uses_their_mounts(tmp_path: Path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    _unit(units, "dev-shm.mount", SHM)
    _unit(units, "nowhere.mount", str(tmp_path / "not-mounted"))
    _unit(units, "wanted.mount", SHM)
    _unit(units, "site.mount", SHM, marker=False)
    request = {"units_dir": str(units), "marker": "# cluster-cli storage.mounts", "wanted": ["wanted.mount"]}
    inside = tempfile.mkdtemp(dir=SHM)
    sleeper = subprocess.Popen(["sleep", "60"], cwd=inside)
    try:
        sleeper_cwd = _working_directory(sleeper.pid)
        with open(f"{inside}/open", "w") as held:
            found = {entry["unit"]: entry for entry in agent.stale_mounts(request, agent._mount_ids())}
            assert held
    finally:
        sleeper.kill()
        sleeper.wait()
        shutil.rmtree(inside)
    assert sorted(found) == ["dev-shm.mount", "nowhere.mount"]
    assert found["dev-shm.mount"]["mounted"] is True
    assert os.getpid() in found["dev-shm.mount"]["users"], "a file open on the mount"
    assert found["nowhere.mount"] == {"unit": "nowhere.mount", "path": str(tmp_path / "not-mounted"),
                                      "mounted": False, "users": []}
    if sleeper_cwd != inside:
        pytest.skip(f"this machine does not let a process read another's working directory "
                    f"(/proc/{sleeper.pid}/cwd: {sleeper_cwd}): the probe cannot see it either")
    assert sleeper.pid in found["dev-shm.mount"]["users"], "a working directory on the mount"


def test_the_probe_asks_for_mounts_only_where_the_inventory_has_storage() -> None:
    from cluster_cli.probe import probe_request

    for text, wanted in ((BASE, None), (storage(), ["/home"])):
        cluster = load(text)
        files = files_by_host(cluster, render_mount_units(cluster), b"k" * 32)["box"]
        request = probe_request(cluster, cluster.hosts["box"], files)["mounts"]
        assert (request if request is None else request["wanted_paths"][:1]) == wanted


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_itself_accepts_every_unit(tmp_path: Path) -> None:
    """systemd-analyze verify refuses a mount unit whose name is not its Where= (and bad settings)."""
    text = storage() + "    - {source: 'tmpfs', path: '/scratch/a b.c', type: tmpfs, options: [size=1g], automount: true}\n"
    # no ':' here: systemd-analyze verify misreads a file name with one (systemd-escape keeps it, as the test above shows)
    text = text.replace("/scratch/a b.c", "/scratch/ü-x_y.z")
    files = render_mount_units(load(text))
    assert len(files) == 6
    for path, unit in files.items():
        (tmp_path / Path(path).name).write_text(unit)
    names = [str(tmp_path / Path(path).name) for path in files]
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", *names], capture_output=True, text=True, check=False,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_health_check_expects_each_compute_hosts_own_mounts() -> None:
    """BASE's gpu1-4 run the gpu group's nodes, box runs dev1-2: /shared/work-1 is the gpu group's
    (and login's), /home and /data every compute host's."""
    document = health_document(load(storage()))
    assert document is not None
    mounts = {node: document["kinds"][kind].get("mounts") for node, kind in document["nodes"].items()}
    assert mounts["gpu1"] == mounts["gpu4"] == ["/home", "/shared/work-1", "/data"]
    assert mounts["dev1"] == ["/home", "/data"]
    assert "mounts" not in health_document(load(BASE))["kinds"][0]  # type: ignore[index]
