"""Unit tests of the test bed's pure parts (no root needed)."""

from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from testbed import Testbed, TestbedConfig, TestbedError
from testbed.cli import build_parser, parse_fuse, parse_shared
from testbed.host import TESTBED_MARKER, CgroupUnitFailed, HostFiles, Running, _write_identity, nspawn_argv
from testbed.mirror import AptRepoError, apt_options, resolve_closure
from testbed.network import fixed_mac, host_addresses
from testbed.rootfs import base_key
from testbed.ssh import SshHost, ansible_inventory, common_args, proxy_command
from testbed.state import HostState, shared_dir

PKG = Path(__file__).resolve().parents[2] / "testbed"


def test_every_bed_host_carries_the_marker_roles_nvml_emulator_requires(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    files = HostFiles("node1", "10.0.0.2", "127.0.0.1 localhost\n", "ssh-ed25519 AAAA", tmp_path, mirror=False)
    _write_identity(tmp_path, files)
    assert (tmp_path / "etc" / TESTBED_MARKER).is_file()
    defaults = yaml.safe_load((PKG.parent / "roles/nvml_emulator/defaults/main.yml").read_text())
    assert defaults["nvml_emulator_test_marker"] == f"/etc/{TESTBED_MARKER}"


def test_fixed_mac_is_stable_unicast_and_local() -> None:
    a = fixed_mac("tb", "h1")
    assert a == fixed_mac("tb", "h1")
    assert a != fixed_mac("tb", "h2") and a != fixed_mac("other", "h1")
    assert re.fullmatch(r"02(:[0-9a-f]{2}){5}", a)


def test_host_addresses_skip_network_and_bridge() -> None:
    bridge, hosts, plen = host_addresses("10.9.8.0/24", 3)
    assert (bridge, hosts, plen) == ("10.9.8.1", ["10.9.8.11", "10.9.8.12", "10.9.8.13"], 24)
    with pytest.raises(TestbedError, match="too small"):
        host_addresses("10.9.8.0/29", 3)
    with pytest.raises(ValueError):
        host_addresses("10.9.8.1/24", 1)  # host bits set


def test_base_key_depends_on_release_and_package_set_only() -> None:
    assert base_key("bookworm", ["a", "b"]) == base_key("bookworm", ["b", "a", "a"])
    assert base_key("bookworm", ["a"]) != base_key("trixie", ["a"])
    assert base_key("bookworm", ["a"]) != base_key("bookworm", ["a", "b"])


@pytest.mark.parametrize(("field", "value", "msg"), [
    ("name", "Bad_Name", "bad test bed name"),
    ("hosts", [], "no hosts"),
    ("hosts", ["a", "a"], "duplicate"),
    ("hosts", ["UPPER"], "bad host name"),
    ("release", "buster", "release must be"),
    ("copy_mode", "rsync", "copy mode"),
    ("apt_sources", "internet", "apt sources must be"),
    ("shared", [("relative/dir", None)], "absolute path"),
    ("shared", [("/srv/../etc", None)], "absolute path"),
    ("shared", [("/srv/x", ["h2"])], "unknown hosts h2"),
    ("shared", [("/srv/x", None), ("/srv/x", ["h1"])], "given twice"),
    ("fuse", ["h2"], "/dev/fuse for unknown hosts h2"),
])
def test_config_validation(field: str, value: object, msg: str) -> None:
    cfg = TestbedConfig(hosts=["h1"])
    setattr(cfg, field, value)
    with pytest.raises(TestbedError, match=msg):
        cfg.validate()


def test_mirror_must_have_an_index(tmp_path: Path) -> None:
    cfg = TestbedConfig(hosts=["h1"], mirror=tmp_path)
    with pytest.raises(TestbedError, match="no Packages index"):
        cfg.validate()


def test_nspawn_runs_inside_the_host_netns_and_uses_it() -> None:
    argv = nspawn_argv("cltb-x-h1", "h1", Path("/r"), "cltb-x-h1", [(Path("/m"), "/mirror")])
    assert argv[:2] == ["nsenter", "--net=/run/netns/cltb-x-h1"]
    for opt in ("-b", "--register=no", "--keep-unit", "--capability=all", "--system-call-filter=@keyring",
                "--network-namespace-path=/run/netns/cltb-x-h1", "--bind-ro=/m:/mirror",
                "--hostname=h1", "--machine=cltb-x-h1"):
        assert opt in argv


def test_shared_dirs_are_read_write_binds_of_the_listed_hosts_only() -> None:
    argv = nspawn_argv("cltb-x-h1", "h1", Path("/r"), "cltb-x-h1", [(Path("/m"), "/mirror")],
                       [(Path("/run/x/shared/srv_state"), "/srv/state")])
    assert "--bind=/run/x/shared/srv_state:/srv/state" in argv
    assert "--bind-ro=/m:/mirror" in argv
    assert shared_dir(Path("/run/x"), "/var/lib/slurm/slurmctld") == Path("/run/x/shared/var_lib_slurm_slurmctld")
    assert parse_shared("/srv/state") == ("/srv/state", None)
    assert parse_shared("/srv/state=ctl1,ctl2") == ("/srv/state", ["ctl1", "ctl2"])
    with pytest.raises(TestbedError, match="no host names"):
        parse_shared("/srv/state=")


def test_dev_fuse_is_bound_into_the_hosts_that_ask_for_it_only() -> None:
    plain = nspawn_argv("cltb-x-h1", "h1", Path("/r"), "cltb-x-h1", [(Path("/m"), "/mirror")])
    fuse = nspawn_argv("cltb-x-h1", "h1", Path("/r"), "cltb-x-h1", [(Path("/m"), "/mirror")], fuse=True)
    assert "--bind=/dev/fuse" not in plain
    assert fuse == [*plain, "--bind=/dev/fuse"]
    assert parse_fuse(["login", "c1, c2", ""]) == ["login", "c1", "c2"]
    args = build_parser().parse_args(["up", "--hosts", "a,b", "--fuse", "a", "--fuse", "b"])
    assert parse_fuse(args.fuse) == ["a", "b"]


def test_a_host_with_dev_fuse_records_it_and_boots_with_it_again() -> None:
    host = HostState.from_json({**SAMPLE_HOST, "fuse": True})
    assert host.fuse
    assert host.to_json() == {**SAMPLE_HOST, "fuse": True}
    assert list(host.to_json())[-2:] == ["fuse", "running"]
    assert not HostState.from_json(SAMPLE_HOST).fuse


# one host as state.json records it (the format readers of running beds rely on)
SAMPLE_HOST = {
    "name": "h2",
    "index": 1,
    "address": "10.213.47.12",
    "mac": "02:5e:3a:91:0c:7d",
    "netns": "cltb-tb-h2",
    "machine": "cltb-tb-h2",
    "cgroups": ["/sys/fs/cgroup/memory/cluster-testbed/tb/h2",
                "/sys/fs/cgroup/freezer/cluster-testbed/tb/h2"],
    "dir": "/var/lib/cluster-testbed/tb/hosts/h2",
    "root": "/var/lib/cluster-testbed/tb/hosts/h2/rootfs",
    "console_log": "/var/lib/cluster-testbed/tb/logs/h2.console.log",
    "binds_rw": [["/var/lib/cluster-testbed/tb/shared/srv_shared", "/srv/shared"]],
    "running": {"nspawn_pid": 4242, "nspawn_start": 987654, "leader_pid": 4250,
                "leader_start": 987700},
}


@pytest.mark.parametrize("running", [SAMPLE_HOST["running"], None])
def test_host_state_json_round_trip_keeps_keys_order_and_values(running: object) -> None:
    sample = {**SAMPLE_HOST, "running": running}
    host = HostState.from_json(json.loads(json.dumps(sample)))
    assert host.to_json() == sample
    assert list(host.to_json()) == list(sample)
    assert json.dumps(host.to_json(), indent=2) == json.dumps(sample, indent=2)


def test_host_state_fields_are_typed() -> None:
    host = HostState.from_json(SAMPLE_HOST)
    assert host.host_dir == Path("/var/lib/cluster-testbed/tb/hosts/h2")
    assert host.root == host.host_dir / "rootfs"
    assert host.console_log == Path("/var/lib/cluster-testbed/tb/logs/h2.console.log")
    assert host.cgroups[1] == Path("/sys/fs/cgroup/freezer/cluster-testbed/tb/h2")
    assert host.binds_rw == [(Path("/var/lib/cluster-testbed/tb/shared/srv_shared"), "/srv/shared")]
    assert host.running == Running(nspawn_pid=4242, nspawn_start=987654, leader_pid=4250,
                                   leader_start=987700)


def test_host_state_reads_a_state_from_before_shared_directories() -> None:
    old = {k: v for k, v in SAMPLE_HOST.items() if k != "binds_rw"}
    host = HostState.from_json(old)
    assert host.binds_rw == []
    assert host.to_json() == {**SAMPLE_HOST, "binds_rw": []}


def test_planned_host_state_is_the_entry_up_always_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    def host_cgroups(bed: str, host: str) -> list[Path]:
        return [Path(f"/sys/fs/cgroup/{c}/cluster-testbed/{bed}/{host}") for c in ("memory", "freezer")]

    monkeypatch.setattr("testbed.cgroups.host_cgroups", host_cgroups)
    run_dir = Path("/var/lib/cluster-testbed/tb")
    shared: list[tuple[str, list[str] | None]] = [("/srv/shared", None), ("/srv/h1-only", ["h1"])]
    planned = HostState.planned("tb", "h2", 1, "10.213.47.12", run_dir, shared).to_json()
    # the entry as up wrote it before HostState existed
    assert planned == {
        "name": "h2",
        "index": 1,
        "address": "10.213.47.12",
        "mac": fixed_mac("tb", "h2"),
        "netns": "cltb-tb-h2",
        "machine": "cltb-tb-h2",
        "cgroups": [str(c) for c in host_cgroups("tb", "h2")],
        "dir": str(run_dir / "hosts" / "h2"),
        "root": str(run_dir / "hosts" / "h2" / "rootfs"),
        "console_log": str(run_dir / "logs" / "h2.console.log"),
        "binds_rw": [[str(shared_dir(run_dir, dst)), dst] for dst, hosts in shared
                     if hosts is None or "h2" in hosts],
        "running": None,
    }
    assert planned["binds_rw"] == [["/var/lib/cluster-testbed/tb/shared/srv_shared", "/srv/shared"]]
    assert list(planned) == list(SAMPLE_HOST)
    with_fuse = HostState.planned("tb", "h2", 1, "10.213.47.12", run_dir, shared, fuse=True).to_json()
    assert with_fuse == {**planned, "fuse": True}


class _FakeBoots:
    """Stands in for nspawn and the container's systemd: the retry around them is what is tested."""

    def __init__(self, waits: list[str | None]) -> None:
        self.waits = waits  # per boot: the systemd state, or None for a failed cgroup unit
        self.boots = 0
        self.stops: list[Running] = []

    def boot(self, *args: object, **kwargs: object) -> Running:
        self.boots += 1
        return Running(nspawn_pid=self.boots, nspawn_start=1, leader_pid=self.boots, leader_start=1)

    def wait_running(self, name: str, r: Running, console_log: Path, timeout: float) -> str:
        state = self.waits[r.leader_pid - 1]
        if state is None:
            raise CgroupUnitFailed(f"{name}: testbed-cgroup-rw.service is failed")
        return state

    def stop(self, name: str, r: Running) -> None:
        self.stops.append(r)


@pytest.mark.parametrize("waits, boots", [(["running"], 1), ([None, "degraded"], 2)])
def test_a_boot_whose_cgroup_remount_failed_is_booted_once_more(
        monkeypatch: pytest.MonkeyPatch, waits: list[str | None], boots: int) -> None:
    fake = _FakeBoots(waits)
    for name in ("boot", "wait_running", "stop"):
        monkeypatch.setattr(f"testbed.host.{name}", getattr(fake, name))
    host = HostState.from_json({**SAMPLE_HOST, "running": None})
    host.boot([])
    assert host.wait_booted([], 5.0) == waits[-1]
    assert fake.boots == boots
    assert [r.leader_pid for r in fake.stops] == list(range(1, boots))
    assert host.running is not None and host.running.leader_pid == boots


def test_a_second_failed_cgroup_remount_fails_the_boot(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeBoots([None, None])
    for name in ("boot", "wait_running", "stop"):
        monkeypatch.setattr(f"testbed.host.{name}", getattr(fake, name))
    host = HostState.from_json({**SAMPLE_HOST, "running": None})
    host.boot([])
    with pytest.raises(CgroupUnitFailed, match="cgroup-rw"):
        host.wait_booted([], 5.0)
    assert fake.boots == 2


def test_state_file_is_saved_back_byte_for_byte(tmp_path: Path) -> None:
    state = {
        "version": 1, "name": "tb", "release": "bookworm", "subnet": "10.213.47.0/24",
        "bridge_ns": "cltb-tb-br", "bridge_address": "10.213.47.1", "copy_mode": "overlay",
        "mirror": "/var/cache/cluster-testbed/mirror/bookworm", "apt_sources": "mirror",
        "created_at": "2024-05-02T10:11:12+0000",
        "hosts": [{**SAMPLE_HOST, "name": "h1", "index": 0, "running": None}, SAMPLE_HOST],
        "timings": {"base_seconds": 0.41, "base_from_cache": True, "host_root_seconds": [0.1, 0.12]},
        "base": "/var/cache/cluster-testbed/base/bookworm-0123abcd/rootfs",
        "binds_ro": [["/var/cache/cluster-testbed/mirror/bookworm", "/mirror"]],
        "boot_states": {"h1": "running", "h2": "degraded"},
    }
    text = json.dumps(state, indent=2) + "\n"  # as up has always written it
    (tmp_path / "state.json").write_text(text)
    bed = Testbed(tmp_path)
    assert [h.name for h in bed.hosts] == ["h1", "h2"] and bed.host("h2").running is not None
    assert bed.state_json() == state
    bed.save()
    assert (tmp_path / "state.json").read_text() == text


def test_ssh_argv_and_inventory_carry_the_proxy(tmp_path: Path) -> None:
    args = common_args(tmp_path, "cltb-x-br")
    assert f"ProxyCommand={proxy_command('cltb-x-br')}" in args
    assert proxy_command("cltb-x-br").startswith("nsenter --net=/run/netns/cltb-x-br ")
    assert proxy_command("cltb-x-br").endswith(" %h %p")
    h = SshHost("h1", "10.0.0.11", "root", 22, str(tmp_path / "k"), args)
    argv = h.argv(["echo", "a b"])
    assert argv[0] == "ssh" and argv[-2:] == ["--", "echo 'a b'"]
    inv = ansible_inventory([h], tmp_path / "cp")
    # JSON scalars in the YAML inventory parse back to the same values
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(inv)
    hv = data["all"]["children"]["testbed"]["hosts"]["h1"]
    assert hv["ansible_host"] == "10.0.0.11" and hv["ansible_port"] == 22
    assert shlex.split(hv["ansible_ssh_common_args"]) == args
    assert hv["ansible_control_path_dir"] == str(tmp_path / "cp")


def test_apt_options_confine_apt_to_the_private_dir(tmp_path: Path) -> None:
    opts = apt_options(tmp_path)
    values = dict(o.split("=", 1) for o in opts if o != "-o")
    for k in ("Dir::Etc::SourceList", "Dir::Etc::SourceParts", "Dir::State",
              "Dir::State::Status", "Dir::Cache"):
        assert values[k].startswith(str(tmp_path)), k


def test_resolve_closure_reads_apt_cache_output(monkeypatch: pytest.MonkeyPatch) -> None:
    out = ("slurmd\n  Depends: libc6\n  Depends: <awk>\n    mawk\n<awk>\nlibc6\n"
           "  Depends: libgcc-s1\nmawk\nlibgcc-s1\npython3:any\n")

    class CP:
        stdout = out

    monkeypatch.setattr("cluster_cli.apt_repo.run", lambda *a, **k: CP())
    assert resolve_closure([], ["slurmd"]) == ["libc6", "libgcc-s1", "mawk", "python3", "slurmd"]
    with pytest.raises(AptRepoError, match="not found"):
        resolve_closure([], ["nosuch"])


def test_cli_parses_every_command() -> None:
    p = build_parser()
    a = p.parse_args(["up", "--hosts", "a,b", "--release", "trixie", "--copy-mode", "copy"])
    assert (a.cmd, a.hosts, a.release, a.copy_mode) == ("up", "a,b", "trixie", "copy")
    assert p.parse_args(["down", "--purge"]).purge
    a = p.parse_args(["exec", "h1", "--", "ls", "-l"])
    assert [c for c in a.command if c != "--"] == ["ls", "-l"]
    a = p.parse_args(["mirror", "--release", "trixie", "--packages", "hello", "munge"])
    assert a.packages == ["hello", "munge"]
    for verb in ("stop", "start", "restart"):
        assert p.parse_args([verb, "--name", "x", "c1"]).host == "c1"
    a = p.parse_args(["up", "--shared", "/srv/a", "--shared", "/srv/b=c1,c2", "--apt-sources", "none"])
    assert (a.shared, a.apt_sources) == (["/srv/a", "/srv/b=c1,c2"], "none")


def test_no_shell_and_no_sys_exit_outside_main() -> None:
    for f in PKG.glob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "shell":
                pytest.fail(f"{f.name}: shell= keyword")
            if (f.name != "__main__.py" and isinstance(node, ast.Attribute)
                    and node.attr == "exit" and isinstance(node.value, ast.Name)
                    and node.value.id == "sys"):
                pytest.fail(f"{f.name}: sys.exit outside __main__")


def test_the_mirror_uses_the_products_repository_code_not_a_copy() -> None:
    import cluster_cli.apt_repo as product
    from testbed import mirror

    for name in ("apt_options", "release_sources", "make_apt_root", "resolve_closure", "download", "index",
                 "pip_download"):
        assert getattr(mirror, name) is getattr(product, name), name
