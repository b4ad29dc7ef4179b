"""Integration tests: real systemd hosts booted by the test bed."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest

from testbed import Testbed, TestbedConfig, TestbedError
from testbed.proc import proc_starttime
from testbed.rootfs import mounts_under
from testbed.state import HostState

pytestmark = pytest.mark.testbed


def _run(argv: list[str], env: dict[str, str] | None = None,
         cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          env=env, cwd=cwd)


def _leader_pid(h: HostState) -> int:
    assert h.running is not None, f"{h.name} is not running"
    return h.running.leader_pid


def test_systemd_is_running_in_each_host(bed: Testbed) -> None:
    for h in bed.hosts:
        state = bed.exec(h.name, ["systemctl", "is-system-running"], check=False).stdout.strip()
        assert state in ("running", "degraded"), (h.name, state)
        comm = bed.exec(h.name, ["cat", "/proc/1/comm"]).stdout.strip()
        assert comm == "systemd"
        assert bed.exec(h.name, ["hostname"]).stdout.strip() == h.name
        failed = bed.exec(h.name, ["systemctl", "--failed", "--no-legend", "--plain"]).stdout
        journals = "".join(
            bed.exec(h.name, ["journalctl", "-b", "--no-pager", "-n", "30", "-u", line.split()[0]], check=False).stdout
            for line in failed.splitlines()
            if line.strip()
        )
        assert failed.strip() == "", f"failed units on {h.name}: {failed}\n{journals}"


def test_each_host_is_isolated_from_the_root_namespace(bed: Testbed) -> None:
    root_ns = os.readlink("/proc/self/ns/net")
    for h in bed.hosts:
        pid = _leader_pid(h)
        assert os.readlink(f"/proc/{pid}/ns/net") != root_ns
        # the host addresses exist nowhere in the root namespace
        assert h.address not in _run(["ip", "-o", "addr"]).stdout
        # no default route: the hosts cannot reach outside
        assert "default" not in bed.exec(h.name, ["ip", "route"]).stdout
    mac = bed.exec("h1", ["cat", "/sys/class/net/eth0/address"]).stdout.strip()
    assert mac == bed.host("h1").mac


def test_exec_does_not_leak_the_control_node_environment(
        bed: Testbed, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", "/control-node-only")
    env = bed.exec("h1", ["env"]).stdout.splitlines()
    assert not [e for e in env if e.startswith("PIP_")]
    assert "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in env


def test_ssh_from_the_control_node_with_the_generated_key(bed: Testbed) -> None:
    key = bed.run_dir / "id_ed25519"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    pub = (bed.run_dir / "id_ed25519.pub").read_text().split()
    assert pub[0] == "ssh-ed25519"
    for h in bed.hosts:
        cp = _run(["ssh", "-F", str(bed.run_dir / "ssh_config"), h.name, "id -un; hostname"])
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.split() == ["root", h.name]
        # the key is the one authorized there
        ak = bed.exec(h.name, ["cat", "/root/.ssh/authorized_keys"]).stdout.split()
        assert ak[:2] == pub[:2]


def test_ssh_refuses_another_key(bed: Testbed, tmp_path: Path) -> None:
    other = tmp_path / "other"
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)])
    h = bed.ssh_host("h1")
    argv = h.argv(["true"])
    argv[argv.index("-i") + 1] = str(other)
    cp = _run(argv)
    assert cp.returncode == 255
    assert "Permission denied" in cp.stderr


def test_host_keys_are_pinned_per_host(bed: Testbed) -> None:
    known = (bed.run_dir / "known_hosts").read_text().splitlines()
    keys = {line.split()[0]: line.split()[2] for line in known}
    assert len(set(keys.values())) == len(bed.hosts), "each host has its own host key"
    for h in bed.hosts:
        served = bed.exec(h.name, ["cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()
        assert keys[f"{h.name},{h.address}"] == served[1]


def test_ansible_inventory_reaches_every_host(bed: Testbed) -> None:
    inv = bed.run_dir / "inventory.yml"
    if not _which("ansible"):
        pytest.skip("ansible not installed")
    cp = _run(["ansible", "-i", str(inv), "testbed", "-m", "ansible.builtin.setup",
               "-a", "filter=ansible_service_mgr"], env={**os.environ, "ANSIBLE_HOST_KEY_CHECKING": "True"})
    assert cp.returncode == 0, cp.stdout + cp.stderr
    for h in bed.hosts:
        assert re.search(rf"{h.name} \| SUCCESS", cp.stdout)
    # whatever the stdout callback (json or yaml), each host reports systemd
    assert len(re.findall(r'ansible_service_mgr"?: "?systemd', cp.stdout)) == len(bed.hosts)


def test_hosts_reach_each_other_by_name(bed: Testbed) -> None:
    for src, dst in (("h1", "h2"), ("h2", "h1")):
        cp = bed.ssh(src, ["getent", "hosts", dst])
        assert cp.stdout.split()[0] == bed.host(dst).address
        probe = (f"import socket;s=socket.create_connection(('{dst}',22),5);"
                 "print(s.recv(64).decode().strip())")
        banner = bed.ssh(src, ["python3", "-c", probe]).stdout
        assert banner.startswith("SSH-2.0-OpenSSH")
        assert bed.ssh(src, ["ping", "-c1", "-W2", dst], check=False).returncode == 0


def test_mirror_is_the_only_apt_source_and_serves_installs(bed: Testbed) -> None:
    sources = bed.exec("h1", ["cat", "/etc/apt/sources.list"]).stdout
    assert [ln for ln in sources.splitlines() if ln.startswith("deb")] == [
        "deb [trusted=yes] file:/mirror ./"]
    assert bed.exec("h1", ["ls", "/etc/apt/sources.list.d"]).stdout.strip() == ""
    ro = bed.exec("h1", ["touch", "/mirror/x"], check=False)
    assert ro.returncode != 0, "the mirror is read-only in the hosts"
    script = ("apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y hello"
              " && hello")
    cp = bed.ssh("h1", ["sh", "-c", script], timeout=300)
    assert cp.stdout.strip().endswith("Hello, world!")
    # the small mirror has no wheelhouse: no pip configuration either
    assert bed.exec("h1", ["test", "-e", "/etc/pip.conf"], check=False).returncode == 1


def test_cgroup_controllers_are_writable_and_private(bed: Testbed) -> None:
    script = "mkdir /sys/fs/cgroup/memory/tbtest && rmdir /sys/fs/cgroup/memory/tbtest && echo ok"
    out = bed.exec("h1", ["sh", "-c", script])
    assert out.stdout.strip() == "ok"
    unit = bed.exec("h1", ["systemctl", "is-active", "testbed-cgroup-rw.service"]).stdout.strip()
    assert unit == "active"
    # the host's hierarchy is its own subtree of the control node's
    h = bed.host("h1")
    own = Path(f"/proc/{_leader_pid(h)}/cgroup").read_text()
    cg = Path(own.split("freezer:")[1].split()[0])
    assert cg.parts[-3:] == ("cluster-testbed", bed.state["name"], "h1")


def test_restart_reboots_one_host_and_keeps_its_disk(bed: Testbed) -> None:
    bed.ssh("h2", ["sh", "-c", "echo kept > /root/marker"])
    boot_id = bed.exec("h2", ["cat", "/proc/sys/kernel/random/boot_id"]).stdout
    leader = _leader_pid(bed.host("h2"))
    r = bed.restart("h2")
    assert r["systemd"] in ("running", "degraded")
    assert _leader_pid(bed.host("h2")) != leader
    assert bed.ssh("h2", ["cat", "/root/marker"]).stdout.strip() == "kept"
    assert bed.exec("h2", ["systemctl", "is-active", "ssh"]).stdout.strip() == "active"
    # the mirror bind comes back too
    assert bed.exec("h2", ["test", "-f", "/mirror/Packages"], check=False).returncode == 0
    # nspawn gives every container boot a boot id of its own (journalctl -b sees a new boot)
    assert bed.exec("h2", ["cat", "/proc/sys/kernel/random/boot_id"]).stdout != boot_id


def test_shared_directories_are_shared_by_their_hosts_only_and_survive_stop_start(bed: Testbed) -> None:
    bed.ssh("h1", ["sh", "-c", "echo from-h1 > /srv/shared/f && chown 64030:64030 /srv/shared/f"])
    assert bed.ssh("h2", ["stat", "-c", "%u %s", "/srv/shared/f"]).stdout.split() == ["64030", "8"]
    assert bed.ssh("h2", ["cat", "/srv/shared/f"]).stdout.strip() == "from-h1"
    bed.ssh("h2", ["sh", "-c", "echo mine > /srv/h2-only/g"])
    assert bed.ssh("h1", ["test", "-e", "/srv/h2-only/g"], check=False).returncode != 0
    stopped = bed.stop("h2")
    assert stopped["systemd"] == "stopped" and not bed.is_alive("h2")
    assert bed.status()["hosts"][1]["systemd"] == "stopped"
    assert bed.start("h2")["systemd"] in ("running", "degraded")
    assert bed.ssh("h2", ["cat", "/srv/shared/f", "/srv/h2-only/g"]).stdout.split() == ["from-h1", "mine"]


def test_up_refuses_a_bed_that_is_up_or_a_name_in_use(bed: Testbed, tmp_path: Path) -> None:
    cfg = TestbedConfig(hosts=["h1", "h2"], name=bed.state["name"], run_dir=bed.run_dir)
    with pytest.raises(TestbedError, match="already up"):
        bed.up(cfg)
    # same name, another run dir: its namespaces are not ours to reuse or delete
    other = Testbed(tmp_path)
    cfg2 = TestbedConfig(hosts=["h1"], name=bed.state["name"], run_dir=tmp_path)
    with pytest.raises(TestbedError, match="seems up in another run dir"):
        other.up(cfg2)
    other.down()
    assert bed.is_alive("h1") and bed.is_alive("h2")


def test_status_reports_every_host(bed: Testbed) -> None:
    st = bed.status()
    assert [h["name"] for h in st["hosts"]] == ["h1", "h2"]
    assert {h["systemd"] for h in st["hosts"]} <= {"running", "degraded"}
    cp = _run(["python", "-m", "testbed", "status", "--run-dir", str(bed.run_dir), "--json"],
              cwd=Path(__file__).resolve().parents[2])
    assert cp.returncode == 0, cp.stderr
    assert [h["address"] for h in json.loads(cp.stdout)["hosts"]] == [
        h.address for h in bed.hosts]


def test_down_leaves_nothing_behind(bed: Testbed) -> None:
    """Last test of the module: take the bed down (twice) and look for leftovers."""
    st = bed.state_json()
    pids = [(h["running"]["nspawn_pid"], h["running"]["nspawn_start"]) for h in st["hosts"]]
    pids += [(h["running"]["leader_pid"], h["running"]["leader_start"]) for h in st["hosts"]]
    ns_inodes = {os.stat(f"/run/netns/{n}").st_ino
                 for n in [st["bridge_ns"], *(h["netns"] for h in st["hosts"])]}
    done = Testbed(bed.run_dir).down()
    assert any(d.startswith("stopped") for d in done)
    # no process (ours, or an ssh/nc left by ansible) still lives in our namespaces
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                ino = os.stat(proc / "ns" / "net").st_ino
            except OSError:
                continue
            assert ino not in ns_inodes, f"pid {proc.name} still in a test bed namespace"
    assert Testbed(bed.run_dir).down() == []  # second time: nothing left to do
    assert_clean(bed.run_dir, st, pids)


def assert_clean(run_dir: Path, st: dict, pids: list[tuple[int, int]]) -> None:  # type: ignore[type-arg]
    netns = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert not {n for n in netns if n.startswith(f"cltb-{st['name']}-")}
    for pid, start in pids:
        assert proc_starttime(pid) != start, f"process {pid} still alive"
    assert mounts_under(run_dir) == []
    assert not (run_dir / "hosts").exists()
    assert not (run_dir / "state.json").exists()
    for h in st["hosts"]:
        for c in h["cgroups"]:
            assert not Path(c).exists(), c


def test_a_failed_up_is_cleaned_by_down(testbed_requirements: None, testbed_cache_dir: Path, tmp_path: Path) -> None:
    """A boot that fails half-way (a bind source that does not exist) leaves
    namespaces and roots behind; down, from a fresh object, removes them."""
    tb = Testbed(tmp_path)
    cfg = TestbedConfig(hosts=["x1"], name=f"pf{os.getpid()}", run_dir=tmp_path,
                        cache_dir=testbed_cache_dir, binds_ro=[(tmp_path / "missing", "/nope")])
    with pytest.raises(TestbedError, match="systemd-nspawn for x1 exited"):
        tb.up(cfg)
    st = json.loads((tmp_path / "state.json").read_text())
    assert os.path.exists(f"/run/netns/cltb-{cfg.name}-x1")
    Testbed(tmp_path).down()
    assert_clean(tmp_path, st, [])


@pytest.mark.parametrize("mode", ["copy"])
def test_copy_mode_boots(testbed_requirements: None, testbed_cache_dir: Path, tmp_path: Path, mode: str) -> None:
    tb = Testbed(tmp_path)
    cfg = TestbedConfig(hosts=["c1"], name=f"pc{os.getpid()}", run_dir=tmp_path,
                        cache_dir=testbed_cache_dir, copy_mode=mode)
    try:
        st = tb.up(cfg)
        assert st["boot_states"]["c1"] in ("running", "degraded")
        assert mounts_under(tmp_path / "hosts") == []  # a plain copy, no overlay
        assert tb.ssh("c1", ["hostname"]).stdout.strip() == "c1"
    finally:
        tb.down()
    assert not (tmp_path / "hosts").exists()


@pytest.mark.skipif(not os.environ.get("TESTBED_TRIXIE"),
                    reason="set TESTBED_TRIXIE=1 to boot a trixie host (debootstrap ~1-2 min once)")
def test_trixie_host_boots(testbed_requirements: None, testbed_cache_dir: Path, tmp_path: Path) -> None:
    tb = Testbed(tmp_path)
    cfg = TestbedConfig(hosts=["t1"], name=f"pt{os.getpid()}", run_dir=tmp_path,
                        cache_dir=testbed_cache_dir, release="trixie")
    try:
        tb.up(cfg)
        assert tb.ssh("t1", ["cat", "/etc/debian_version"]).stdout.startswith("13")
    finally:
        tb.down()


def _which(tool: str) -> bool:
    from shutil import which
    return which(tool) is not None
