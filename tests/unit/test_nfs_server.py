"""storage.nfs_server: the shipped exports, the rendered exports file (checked by exportfs's own
parser where it runs), every refusal at its file:line, the mounts the exports add on the clients
(never on the server), the managed users' homes made on the server, the Ansible group, and plan's,
the probe's and the bundle's packages and file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from unit_helpers import BASE, expected_problems, line_of, load, problems, started

from cluster_cli.ansible.variables import nfs_server_variables, storage_variables
from cluster_cli.bundle.packages import debian_packages, package_list
from cluster_cli.host_files import files_by_host
from cluster_cli.plan import _daemon_changes, _package_changes
from cluster_cli.probe import HostProbe, agent, daemon_request
from cluster_cli.render import render_configs
from cluster_cli.render.ansible_inventory import inventory_document
from cluster_cli.render.nfs_exports import EXPORTS_BUILD_PATH, exports_text, render_nfs_exports
from cluster_cli.shared_storage import SERVER_PACKAGES, packages_by_host
from cluster_cli.slurm_facts import ConfChange
from cluster_cli.status import daemon_statuses

SERVER = "storage:\n  nfs_server:\n    host: box\n"
OPTIONS = "(rw,sync,root_squash,no_subtree_check)"
OTHERS = ["10.0.0.1", "10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4"]  # every host but box (10.0.0.2)
PEOPLE = ("people:\n  users:\n    - {name: alice, uid: 5001}\n    - {name: bob, uid: 5002, home: /srv/bob}\n"
          "    - {name: carol, uid: 5003, state: absent}\n")


def _entry(path: str, clients: list[str], options: str = OPTIONS) -> str:
    return " \\\n    ".join([path, *(f"{client}{options}" for client in clients)])


def test_a_server_without_exports_exports_home_and_shared_to_every_other_host() -> None:
    text = exports_text(load(BASE + SERVER))
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    assert body == _entry("/home", OTHERS) + "\n" + _entry("/shared", OTHERS)
    assert text.startswith("# The NFS exports of box for cluster 'test'.")


def test_given_clients_and_options_replace_the_defaults_and_exports_come_in_path_order() -> None:
    text = exports_text(load(BASE + SERVER + "    exports:\n      - {path: /scratch, clients: [10.0.0.0/16], options: [rw, async]}\n"
                                             "      - {path: /data, clients: ['*.example.org', '@gpu'], options: [ro]}\n"))
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["/data \\", "    *.example.org(ro) \\", "    @gpu(ro)", "/scratch \\", "    10.0.0.0/16(rw,async)"]


def test_no_server_renders_no_exports_and_an_empty_group() -> None:
    for text in (BASE, BASE + "storage:\n  mounts: []\n"):
        cluster = load(text)
        assert render_nfs_exports(cluster) == {}
        assert inventory_document(cluster)["all"]["children"]["cluster"]["children"]["nfs_server"] == {"hosts": {}}
    files = {item.path for item in render_configs(load(BASE + SERVER), None)}
    assert EXPORTS_BUILD_PATH in files


def test_the_server_is_the_only_host_of_its_group() -> None:
    children = inventory_document(load(BASE + SERVER))["all"]["children"]["cluster"]["children"]
    assert children["nfs_server"] == {"hosts": {"box": None}}


@pytest.mark.parametrize("client", ["'*'", "0.0.0.0/0", "'::/0'", "10.0.0.0/0"])
def test_an_export_to_the_world_is_refused_at_its_line(client: str) -> None:
    text = BASE + SERVER + f"    exports:\n      - path: /shared\n        clients: [10.0.0.0/16, {client}]\n"
    assert problems(text) == expected_problems(text, [
        (f"clients: [10.0.0.0/16, {client}]", "storage.nfs_server.exports[0].clients[1]",
         f"{client.strip(chr(39))!r} exports to the world: name the cluster's hosts or subnets (e.g. 10.0.0.0/16)"),
    ])


def test_no_root_squash_is_refused_at_its_line() -> None:
    text = BASE + SERVER + "    exports:\n      - path: /shared\n        options: [rw, sync, no_root_squash]\n"
    assert problems(text) == expected_problems(text, [
        ("options: [rw, sync, no_root_squash]", "storage.nfs_server.exports[0].options[2]",
         "no_root_squash lets root on any client own every file of the export: keep root_squash "
         "(the homes are made on the server itself, docs/storage.md)"),
    ])


def test_a_server_that_is_not_an_inventory_host_is_refused_at_its_line() -> None:
    text = BASE + "storage:\n  nfs_server:\n    host: filer\n"
    assert problems(text) == expected_problems(text, [
        ("host: filer", "storage.nfs_server.host", "'filer' is not a host of this inventory (head, gpu1, gpu2, gpu3, "
                                                   "gpu4, box): the NFS server must be one the deploy configures"),
    ])


def test_system_directories_repeated_and_nested_exports_are_refused() -> None:
    text = BASE + SERVER + ("    exports:\n      - {path: /etc/x}\n      - {path: /data}\n      - {path: /data/}\n"
                            "      - {path: /data/inner}\n      - {path: /}\n")
    assert problems(text) == expected_problems(text, [
        ("path: /etc/x}", "storage.nfs_server.exports[0].path", "/etc/x is inside the system directory /etc: the "
         "clients would get the server's own system files; export a directory of its own"),
        ("path: /data/}", "storage.nfs_server.exports[2].path", "/data is exported by storage.nfs_server.exports[1] already"),
        ("path: /data/inner}", "storage.nfs_server.exports[3].path", "/data/inner is inside /data, exported by "
         "storage.nfs_server.exports[1]: a client of both would see one through the other; export it once"),
        ("path: /}", "storage.nfs_server.exports[4].path", "/ is the root file system: the clients would get the "
         "server's own system files; export a directory of its own"),
    ])


def test_a_mount_over_an_export_on_the_server_is_refused_at_the_section_for_the_shipped_exports() -> None:
    text = BASE + "storage:\n  mounts:\n    - {source: 'filer:/h', path: /home}\n  nfs_server:\n    host: box\n"
    assert problems(text) == expected_problems(text, [
        ("nfs_server:", "storage.nfs_server", "/home would be hidden on box by storage.mounts[0] (/home), which "
                                                   "that host mounts: leave the server out of that mount's hosts"),
    ])


ONE_HOST = """\
cluster_name: one
hosts:
  - name: solo
    address: 10.0.0.9
controllers:
  primary: solo
accounting:
  host: solo
node_groups:
  - name: dev
    nodes: dev[1-2]
    host: solo
    base_port: 17001
    cores_per_socket: 2
    real_memory_mb: 1000
partitions:
  - name: all
    nodes: [dev]
    default: true
storage:
  nfs_server:
    host: solo
"""


def test_a_server_without_any_other_host_is_refused_rather_than_exporting_to_everyone() -> None:
    message = "{} has no client: the cluster has no host besides solo; name its clients (exportfs exports a path " \
              "without clients to everyone)"
    assert problems(ONE_HOST) == expected_problems(ONE_HOST, [
        ("nfs_server:", "storage.nfs_server", message.format("/home")),
        ("nfs_server:", "storage.nfs_server", message.format("/shared")),
    ])
    named = ONE_HOST + "    exports: [{path: /shared, clients: [10.9.0.0/24]}]\n"
    assert problems(named) == []
    assert "10.9.0.0/24(rw,sync,root_squash,no_subtree_check)" in exports_text(load(named))


def test_field_errors_of_the_model_are_at_their_lines() -> None:
    text = BASE + SERVER + ("    exports:\n      - path: /a b\n      - path: /x\n        clients: ['h(rw)']\n"
                            "        options: ['rw,sync']\n        mode: '17777'\n        colour: red\n")
    at = [("path: /a b", "storage.nfs_server.exports[0].path"), ("clients: ['h(rw)']", "storage.nfs_server.exports[1].clients[0]"),
          ("options: ['rw,sync']", "storage.nfs_server.exports[1].options[0]"),
          ("mode: '17777'", "storage.nfs_server.exports[1].mode"), ("colour: red", "storage.nfs_server.exports[1].colour")]
    found = problems(text)
    assert [problem.split(": ", 2)[:2] for problem in found] == [
        [f"inv.yaml:{line_of(text, snippet)}", field] for snippet, field in at], found


def test_the_exports_are_mounted_on_login_and_compute_hosts_but_never_on_the_server() -> None:
    cluster = load(BASE + SERVER)
    mounts = storage_variables(cluster, Path("/b"))["storage_client_mounts"]
    assert [(mount["path"], mount["fstab"]) for mount in mounts] == [
        ("/home", "10.0.0.2:/home /home nfs4 _netdev,nofail,hard 0 0"),
        ("/shared", "10.0.0.2:/shared /shared nfs4 _netdev,nofail,hard 0 0")]
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    # head is the login host; box (the server) runs compute nodes dev1 and dev2 but mounts nothing
    assert list(children["storage_mount_0"]["hosts"]) == ["head", "gpu1", "gpu2", "gpu3", "gpu4"]
    assert packages_by_host(cluster.inventory, cluster.hosts)["box"] == list(SERVER_PACKAGES)
    assert packages_by_host(cluster.inventory, cluster.hosts)["gpu1"] == ["nfs-common"]


def test_a_declared_mount_at_an_exported_path_wins_and_mount_false_only_exports() -> None:
    text = BASE + ("storage:\n  mounts:\n    - {source: 'box:/home', path: /home, type: nfs, hosts: [login]}\n"
                   "  nfs_server:\n    host: box\n    exports:\n      - {path: /home}\n      - {path: /shared, mount: false}\n")
    cluster = load(text)
    assert [mount.source for mount in cluster.inventory.storage.mounts] == ["box:/home"]
    assert "/shared \\" in exports_text(cluster)


def test_a_declared_mount_from_the_server_is_not_mounted_on_the_server_itself() -> None:
    cluster = load(BASE + "storage:\n  mounts:\n    - {source: 'box:/data', path: /data}\n"
                          "    - {source: '10.0.0.2:/scratch', path: /scratch, type: nfs4}\n")
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    assert "box" not in children["storage_mount_0"]["hosts"] and "box" not in children["storage_mount_1"]["hosts"]
    assert "head" in children["storage_mount_0"]["hosts"]


def test_the_managed_users_homes_inside_an_export_are_made_on_the_server_private() -> None:
    variables = nfs_server_variables(load(BASE + PEOPLE + SERVER), Path("/build"))
    # bob's home is outside every export, carol is absent
    assert variables["nfs_server_homes"] == [{"path": "/home/alice", "owner": "alice", "group": "alice", "mode": "0700"}]
    assert variables["nfs_server_exports"] == [{"path": "/home", "owner": "root", "group": "root", "mode": "0755"},
                                               {"path": "/shared", "owner": "root", "group": "root", "mode": "1777"}]
    assert variables["nfs_server_exports_src"] == "/build/storage/cluster-cli.exports"
    assert variables["nfs_server_exports_file"] == "/etc/exports.d/cluster-cli.exports"


def test_the_smoke_work_directory_goes_to_the_shipped_work_area_and_the_server_makes_it() -> None:
    """Unless the inventory places training.work_dir: in /shared, made on the server for the test user
    (a client's squashed root could make it, but not give it to the test user)."""
    cluster = load(BASE + SERVER)
    assert cluster.inventory.training.work_dir == "/shared/cluster-training"
    assert nfs_server_variables(cluster, Path("/b"))["nfs_server_work_dirs"] == [
        {"path": "/shared/cluster-training", "owner": "smoke", "group": "smoke", "mode": "0755"}]
    placed = load(BASE + SERVER + "training:\n  work_dir: /srv/jobs\n")
    assert placed.inventory.training.work_dir == "/srv/jobs"
    assert nfs_server_variables(placed, Path("/b"))["nfs_server_work_dirs"] == []
    in_home = load(BASE + SERVER + "training:\n  work_dir: /home/smoke-jobs\n")
    assert nfs_server_variables(in_home, Path("/b"))["nfs_server_work_dirs"][0]["path"] == "/home/smoke-jobs"
    no_work_area = load(BASE + SERVER + "    exports:\n      - {path: /home}\n      - {path: /shared, mount: false}\n")
    assert no_work_area.inventory.training.work_dir == "/srv/cluster-training"  # /shared is not mounted
    assert load(BASE).inventory.training.work_dir == "/srv/cluster-training"


def test_the_clients_leave_the_homes_on_the_exports_to_the_server() -> None:
    """roles/common's people task gets the shared mounts with their groups: a client (in the group) makes
    no home there; the server is in neither group, so it makes the homes on its own disk."""
    cluster = load(BASE + PEOPLE + SERVER)
    shared = storage_variables(cluster, Path("/b"))["common_people_shared_mounts"]
    assert shared == [{"path": "/home", "hosts_group": "storage_mount_0"},
                      {"path": "/shared", "hosts_group": "storage_mount_1"}]
    children = inventory_document(cluster)["all"]["children"]["cluster"]["children"]
    assert "box" not in children["storage_mount_0"]["hosts"] and "gpu1" in children["storage_mount_0"]["hosts"]
    local = load(BASE + "storage:\n  mounts:\n    - {source: tmpfs, path: /scratch, type: tmpfs}\n")
    assert storage_variables(local, Path("/b"))["common_people_shared_mounts"] == []


def test_plan_compares_the_exports_file_on_the_server_only_and_the_bundle_packs_the_server() -> None:
    cluster = load(BASE + SERVER)
    rendered = {item.path: item.content for item in render_configs(cluster, None)}
    by_host = files_by_host(cluster, rendered, b"k" * 32)
    holders = {name for name, files in by_host.items() if any(item.source == EXPORTS_BUILD_PATH for item in files)}
    assert holders == {"box"}
    [exports] = [item for item in by_host["box"] if item.source == EXPORTS_BUILD_PATH]
    assert exports.path == "/etc/exports.d/cluster-cli.exports" and exports.sha256
    assert {"nfs-kernel-server", "nfs-common"} <= set(debian_packages(cluster))
    assert "nfs-kernel-server" not in debian_packages(load(BASE + "storage:\n  mounts: []\n"))


def test_the_roles_packages_are_the_ones_plan_and_the_bundle_know() -> None:
    assert package_list("nfs_server_packages") == SERVER_PACKAGES


def _exportfs_in_namespace(directory: Path, exports: str) -> subprocess.CompletedProcess[str]:
    """Debian's exportfs in a mount namespace of its own, with ``exports`` as /etc/exports and
    DIRECTORY's state as /var/lib/nfs (the host's own are never touched); then its etab."""
    (directory / "state").mkdir()
    (directory / "exports").write_text(exports)
    script = (f"mount --bind {directory}/exports /etc/exports && mount --bind {directory}/state /var/lib/nfs && "
              "exportfs -ra && cat /var/lib/nfs/etab")
    return subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, check=False)


def _exportfs_reason() -> str | None:
    if shutil.which("exportfs") is None or not Path("/var/lib/nfs").is_dir() or not Path("/etc/exports").is_file():
        return "exportfs is not installed (apt-get install nfs-kernel-server)"
    if subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False).returncode != 0:
        return "no mount namespace here (unshare -m needs root)"
    return None


def test_exportfs_parses_the_rendered_exports_and_applies_root_squash_and_sync(tmp_path: Path) -> None:
    reason = _exportfs_reason()
    if reason:
        pytest.skip(reason)
    home, shared = tmp_path / "home", tmp_path / "shared"
    home.mkdir()
    shared.mkdir()
    rendered = exports_text(load(BASE + SERVER + "    exports:\n      - path: /home\n      - path: /shared\n"
                                                 "        clients: [10.0.0.0/16, gpu-node-7]\n"))
    # the same entries on directories of the test's (exportfs checks that each exists; /tmp is refused in an inventory)
    text = rendered.replace("\n/home \\", f"\n{home} \\").replace("\n/shared \\", f"\n{shared} \\")
    assert text.count(str(tmp_path)) == 2
    work = tmp_path / "exportfs"
    work.mkdir()
    done = _exportfs_in_namespace(work, text)
    assert done.returncode == 0, done.stderr
    assert "unknown keyword" not in done.stderr and "syntax error" not in done.stderr
    etab = done.stdout.splitlines()
    assert sorted(line.split("\t")[1].split("(")[0] for line in etab if line.startswith(f"{home}\t")) == sorted(OTHERS)
    assert all(",sync," in line and ",root_squash," in line and "no_root_squash" not in line for line in etab), etab
    # the check sees a broken file: the same parser refuses it, naming the file
    broken = tmp_path / "broken"
    broken.mkdir()
    refused = _exportfs_in_namespace(broken, text.replace("no_subtree_check", "no_such_option", 1))
    assert refused.returncode != 0 and 'unknown keyword "no_such_option"' in refused.stderr, refused.stderr


def test_plan_installs_the_server_package_on_the_server_and_the_client_on_the_others() -> None:
    cluster = load(BASE + SERVER)
    wanted = packages_by_host(cluster.inventory, cluster.hosts)
    rows = {name: {change.subject: change.detail for change in
                   _package_changes(cluster, name, cluster.hosts[name].roles, HostProbe(name), wanted[name])}
            for name in ("box", "gpu1")}
    assert rows["box"]["nfs-kernel-server"] == "not installed: install" and "nfs-common" not in rows["box"]
    assert rows["gpu1"]["nfs-common"] == "not installed: install" and "nfs-kernel-server" not in rows["gpu1"]
    installed = HostProbe("box", packages={"nfs-kernel-server": "1:2.6.2-4+deb12u1"})
    changes = _package_changes(cluster, "box", cluster.hosts["box"].roles, installed, wanted["box"])
    assert changes and "nfs-kernel-server" not in {change.subject for change in changes}


def test_plan_and_status_ask_the_server_about_its_daemon_and_its_port() -> None:
    cluster = load(BASE + SERVER)
    request = daemon_request(cluster, cluster.hosts["box"])
    assert request["ports"]["nfs-server"] == ["127.0.0.1", 2049]
    assert request["programs"]["nfs-server"] == "rpc.mountd" and request["pidfiles"]["nfs-server"] == ""
    assert "nfs-server" not in daemon_request(cluster, cluster.hosts["gpu1"])["ports"]
    assert nfs_server_variables(cluster, Path("/b"))["nfs_server_port"] == 2049  # the port the role waits for

    daemons = {name: {"pid": 1, "running": name != "nfs-server"} for name in request["pidfiles"]}
    stopped = HostProbe("box", daemons=daemons, ports={name: name != "nfs-server" for name in request["ports"]})
    [status] = [line for line in daemon_statuses(cluster, {**{name: HostProbe(name) for name in cluster.hosts},
                                                           "box": stopped}) if line.daemon == "nfs-server"]
    assert (status.host, status.port, status.problem) == ("box", 2049, "not running")
    rows = _daemon_changes(cluster, "box", [], stopped, ConfChange(False, False, False, False, ()))
    assert [(row.subject, row.detail) for row in rows] == [("nfs-server", "not running: start")]


def test_a_slurmd_on_the_servers_port_is_refused_at_the_server() -> None:
    text = BASE.replace("base_port: 17001", "base_port: 2049") + SERVER.replace("box\n", "box  # the server\n")
    assert problems(text) == expected_problems(text, [
        ("box  # the server", "storage.nfs_server.host", "port 2049 on host 'box' is used by both slurmd of dev1 and the NFS server"),
    ])


def test_the_agent_finds_the_server_by_rpc_mountd(tmp_path: Path) -> None:
    program = tmp_path / "rpc.mountd"
    program.symlink_to(shutil.which("sleep") or "/bin/sleep")
    server = started([str(program), "30"])
    try:
        assert agent.process_facts("", 0.0, "nfs-server", "rpc.mountd")["running"]
        assert agent.find_daemon("nfs-server") is None  # nothing runs a program of the daemon's own name
    finally:
        server.kill()
        server.wait()
