"""plugins/filter/cluster_filters.py: what each filter returns, edge cases included (plain Python,
no Ansible run). Each filter stands for Jinja the roles or playbooks used to spell out, and must
return what that Jinja returned."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    # The filters import the collection's plugin_utils as ansible_collections.cluster_cli.slurm...:
    # collections/ holds the link that makes the repository root that package (ansible.cfg's
    # collections_path), for plain Python too.
    if str(REPO / "collections") not in sys.path:
        sys.path.insert(0, str(REPO / "collections"))
    spec = importlib.util.spec_from_file_location("cluster_filters", REPO / "plugins" / "filter" / "cluster_filters.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


F = _load()




def test_every_filter_is_registered_under_its_function_name() -> None:
    filters = F.FilterModule().filters()
    assert filters, "no filters"
    for name, function in filters.items():
        assert function is getattr(F, name), name


# ---- daemon_instances -------------------------------------------------------------------------


def test_daemon_instances_put_each_name_into_unit_pidfile_and_arguments() -> None:
    assert F.daemon_instances(["n1", "n2"], "slurmd@{name}.service", "/run/slurm/slurmd-{name}.pid",
                              ["-D", "--conf-server", "ctl", "-N", "{name}"]) == [
        {"name": "n1", "unit": "slurmd@n1.service", "pidfile": "/run/slurm/slurmd-n1.pid",
         "args": ["-D", "--conf-server", "ctl", "-N", "n1"]},
        {"name": "n2", "unit": "slurmd@n2.service", "pidfile": "/run/slurm/slurmd-n2.pid",
         "args": ["-D", "--conf-server", "ctl", "-N", "n2"]},
    ]


def test_daemon_instances_of_no_names_and_without_arguments() -> None:
    assert F.daemon_instances([], "u@{name}", "/p/{name}") == []
    assert F.daemon_instances(["x"], "nvidia-persistenced", "") == [
        {"name": "x", "unit": "nvidia-persistenced", "pidfile": "", "args": []}]


# ---- role_default -----------------------------------------------------------------------------


def test_role_default_reads_the_owning_roles_defaults() -> None:
    defaults = yaml.safe_load((REPO / "roles" / "slurm_common" / "defaults" / "main.yml").read_text())
    assert F.role_default("slurm_common_conf_dir") == defaults["slurm_common_conf_dir"] == "/etc/slurm"
    assert F.role_default("slurm_common_packages") == ["slurm-client", "slurm-wlm-basic-plugins"]


def test_role_default_returns_a_copy() -> None:
    F.role_default("slurm_common_packages").append("changed")
    assert F.role_default("slurm_common_packages") == ["slurm-client", "slurm-wlm-basic-plugins"]


def test_role_default_takes_the_longest_role_prefix(tmp_path: Path) -> None:
    for role, text in (("slurm", "slurm_common_x: short\n"), ("slurm_common", "slurm_common_x: long\n")):
        (tmp_path / role / "defaults").mkdir(parents=True)
        (tmp_path / role / "defaults" / "main.yml").write_text(text)
    assert F.role_default("slurm_common_x", tmp_path) == "long"


def test_role_default_falls_back_to_a_shorter_prefix_that_defines_it(tmp_path: Path) -> None:
    for role, text in (("slurm", "slurm_common_y: short\n"), ("slurm_common", "slurm_common_x: long\n")):
        (tmp_path / role / "defaults").mkdir(parents=True)
        (tmp_path / role / "defaults" / "main.yml").write_text(text)
    assert F.role_default("slurm_common_y", tmp_path) == "short"


@pytest.mark.parametrize("name", ["slurm_common_no_such_variable", "cluster_service_manager", "nothing", ""])
def test_role_default_of_an_unknown_variable_fails(name: str) -> None:
    # cluster_service_manager is common's, but without the common_ prefix: not found by name.
    with pytest.raises(F.AnsibleFilterError, match="has a default for"):
        F.role_default(name)


def test_role_default_refuses_a_template_default() -> None:
    # common_teardown_purge: "{{ teardown_purge | default(false) }}" would come back untemplated.
    with pytest.raises(F.AnsibleFilterError, match="is a template"):
        F.role_default("common_teardown_purge")


def test_role_default_of_an_empty_defaults_file(tmp_path: Path) -> None:
    (tmp_path / "empty" / "defaults").mkdir(parents=True)
    (tmp_path / "empty" / "defaults" / "main.yml").write_text("---\n")
    with pytest.raises(F.AnsibleFilterError):
        F.role_default("empty_x", tmp_path)


# ---- slurm_node_names -------------------------------------------------------------------------


def _hostvars(**hosts: dict) -> dict:
    return {name: {"inventory_hostname_short": name.split(".")[0], **values} for name, values in hosts.items()}


def test_slurm_node_names_lists_every_instance_in_host_order() -> None:
    hostvars = _hostvars(**{
        "c1.example.org": {"slurmd_nodes": [{"name": "node1", "port": 17001}, {"name": "node2", "port": 17002}]},
        "c2.example.org": {},  # no slurmd_nodes: the slurmd role's default, one node named like the host
        "c3": {"slurmd_nodes": []},  # defined and empty: no node
    })
    assert F.slurm_node_names(["c1.example.org", "c2.example.org", "c3"], hostvars) == ["node1", "node2", "c2"]
    assert F.slurm_node_names(["c2.example.org", "c1.example.org"], hostvars) == ["c2", "node1", "node2"]


def test_slurm_node_names_keeps_duplicates_for_the_uniqueness_check() -> None:
    hostvars = _hostvars(a={"slurmd_nodes": [{"name": "n1"}]}, b={"slurmd_nodes": [{"name": "n1"}]}, c={})
    assert F.slurm_node_names(["a", "b", "c", "c"], hostvars) == ["n1", "n1", "c", "c"]


def test_slurm_node_names_of_no_host() -> None:
    assert F.slurm_node_names([], {}) == []


def test_slurm_node_names_treats_an_undefined_value_like_a_missing_one() -> None:
    from jinja2 import Undefined

    # hostvars hands out an undefined value for a template naming an undefined variable
    hostvars = _hostvars(h4={"slurmd_nodes": Undefined()}, h5={"slurmd_nodes": [{"name": Undefined()}, {"name": "n"}]})
    assert F.slurm_node_names(["h4", "h5"], hostvars) == ["h4", "n"]


def test_slurm_node_names_leaves_out_entries_without_a_name() -> None:
    # The slurmd role's preflight rejects them on their host; the list leaves them out.
    hostvars = _hostvars(h={"slurmd_nodes": [{"port": 1}, {"name": "n2"}, "not-a-mapping"]})
    assert F.slurm_node_names(["h"], hostvars) == ["n2"]


def test_slurm_node_names_of_an_unknown_host_fails() -> None:
    with pytest.raises(KeyError):
        F.slurm_node_names(["nowhere"], {})


# ---- reasons_by_hosts --------------------------------------------------------------------------


def test_reasons_by_hosts_says_each_reason_once_with_its_hosts_as_a_hostlist() -> None:
    change = {"reasons": ["slurm.conf is new here: restart slurmctld and slurmd"]}
    hostvars = {f"c{index}": {"slurm_common_change": change} for index in range(1, 1001)}
    hostvars["ctl"] = {"slurm_common_change": {"reasons": ["SelectType changed", change["reasons"][0]]}}
    hostvars["login"] = {}  # a host where the fact was never set (its play failed before it)
    hostvars["c7"] = {"slurm_common_change": {"reasons": []}}
    hosts = ["ctl", "login", *(f"c{index}" for index in range(1, 1001))]
    assert F.reasons_by_hosts(hosts, hostvars, "slurm_common_change") == [
        "ctl: SelectType changed",
        "c[1-6,8-1000],ctl: slurm.conf is new here: restart slurmctld and slurmd",
    ]
    assert F.reasons_by_hosts(["login", "c7"], hostvars, "slurm_common_change") == []


# ---- fake_gpu_device_items (roles/slurmd) -----------------------------------------------------


def test_fake_gpu_device_items_are_root_character_devices_of_the_major() -> None:
    gpus = [{"path": "/dev/fake-gpu/nvidia0", "minor": 0}, {"path": "/dev/fake-gpu/nvidia12", "minor": "12"}]
    assert F.fake_gpu_device_items(gpus, "195", "0666") == [
        {"path": "/dev/fake-gpu/nvidia0", "major": 195, "minor": 0, "owner": "root", "group": "root", "mode": "0666"},
        {"path": "/dev/fake-gpu/nvidia12", "major": 195, "minor": 12, "owner": "root", "group": "root", "mode": "0666"},
    ]


def test_fake_gpu_device_items_of_no_gpu() -> None:
    assert F.fake_gpu_device_items([], 195, "0666") == []


@pytest.mark.parametrize(
    ("value", "number"),
    [(255, 255), ("255", 255), ("3.7", 3), (3.7, 3), ("0x1f", 0), ("abc", 0), (None, 0), (-1, -1), (True, 1)],
)
def test_fake_gpu_numbers_convert_like_jinjas_int_filter(value: object, number: int) -> None:
    # Jinja's int: strings in base 10, "42.23" -> 42, anything else 0 (the slurmd preflight rejects bad minors).
    assert F._jinja_int(value) == number
    [item] = F.fake_gpu_device_items([{"path": "/d", "minor": value}], value, "0666")
    assert (item["major"], item["minor"]) == (number, number)


# ---- ibv_devinfo_ports, ib_hca_wanted, ib_ports_missing (roles/nccl) -------------------------

IBV_DEVINFO = """hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t20.31.1014
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\tport:\t2
\t\t\tstate:\t\t\tPORT_DOWN (1)

hca_id:\tmlx5_1
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_INIT (2)
"""
PORTS = [
    {"device": "mlx5_0", "port": "1", "state": "PORT_ACTIVE"},
    {"device": "mlx5_0", "port": "2", "state": "PORT_DOWN"},
    {"device": "mlx5_1", "port": "1", "state": "PORT_INIT"},
]


def test_ibv_devinfo_ports() -> None:
    assert F.ibv_devinfo_ports(IBV_DEVINFO) == PORTS


@pytest.mark.parametrize(
    "text", ["", "No IB devices found\n", "hca_id:\tmlx5_0\n\ttransport:\tInfiniBand (0)\n", "\t\tstate:\tPORT_ACTIVE (4)\n"]
)
def test_ibv_devinfo_ports_of_output_without_ports(text: str) -> None:
    # No adapter, an adapter without ports, or a state line before any port line.
    assert F.ibv_devinfo_ports(text) == []


def test_ibv_devinfo_ports_needs_a_value_on_each_line() -> None:
    # "hca_id:" or "port:" alone change nothing: the port before is still the current one.
    text = "hca_id:\tmlx5_0\n\tport:\t1\nhca_id:\n\tport:\n\tstate:\tPORT_ACTIVE (4)\n"
    assert F.ibv_devinfo_ports(text) == [{"device": "mlx5_0", "port": "1", "state": "PORT_ACTIVE"}]


def test_ibv_devinfo_ports_a_new_device_resets_the_port() -> None:
    text = "hca_id:\tmlx5_0\n\tport:\t1\nhca_id:\tmlx5_1\n\tstate:\tPORT_ACTIVE (4)\n"
    assert F.ibv_devinfo_ports(text) == []


@pytest.mark.parametrize(
    ("hca", "wanted"),
    [
        ("", []),
        ("^mlx5_2", []),  # an exclusion list: nothing to check
        ("mlx5_0", [{"name": "mlx5_0", "port": "", "exact": False}]),
        ("=mlx5_0", [{"name": "mlx5_0", "port": "", "exact": True}]),
        ("==mlx5_0", [{"name": "mlx5_0", "port": "", "exact": True}]),
        (
            "mlx5_0:1,mlx5_1:1",
            [{"name": "mlx5_0", "port": "1", "exact": False}, {"name": "mlx5_1", "port": "1", "exact": False}],
        ),
        (" mlx5_0 , ,mlx5_1 ", [{"name": "mlx5_0", "port": "", "exact": False}, {"name": "mlx5_1", "port": "", "exact": False}]),
        ("mlx5_0:", [{"name": "mlx5_0", "port": "", "exact": False}]),
        ("mlx5_0:1:x", [{"name": "mlx5_0", "port": "1", "exact": False}]),
        ("=,", []),
    ],
)
def test_ib_hca_wanted(hca: str, wanted: list) -> None:
    assert F.ib_hca_wanted(hca) == wanted


@pytest.mark.parametrize(
    ("hca", "missing"),
    [
        ("mlx5_0", []),
        ("mlx5", []),  # a prefix: mlx5_0 has an ACTIVE port
        ("=mlx5", ["mlx5"]),  # an exact name: no device is called mlx5
        ("mlx5_0:1", []),
        ("mlx5_0:2", ["mlx5_0:2"]),  # that port is DOWN
        ("mlx5_1", ["mlx5_1"]),  # INIT is not ACTIVE
        ("mlx5_0,mlx5_1:1,roce", ["mlx5_1:1", "roce"]),
        ("", []),
    ],
)
def test_ib_ports_missing(hca: str, missing: list) -> None:
    active = [port for port in F.ibv_devinfo_ports(IBV_DEVINFO) if port["state"] == "PORT_ACTIVE"]
    assert F.ib_ports_missing(F.ib_hca_wanted(hca), active) == missing


def test_ib_ports_missing_without_active_ports_lists_every_wanted_adapter() -> None:
    assert F.ib_ports_missing(F.ib_hca_wanted("mlx5_0:1,mlx5_1"), []) == ["mlx5_0:1", "mlx5_1"]


# ---- slurmd_pids, nccl_probe (roles/nccl) --------------------------------------------------

PGREP = [
    "123 /usr/sbin/slurmd -D -s -N node1",
    "124 /usr/sbin/slurmd -D -s -Nnode2",
    "125 /usr/sbin/slurmd -D -s",  # no -N: serves the short host name
    "126 /usr/sbin/slurmd -D -s -N  node3 -v",
]


@pytest.mark.parametrize(
    ("names", "pids"),
    [
        ([], ["123", "124", "125", "126"]),  # slurmd_nodes not set: every slurmd
        (["node1", "node3"], ["123", "126"]),
        (["h1"], ["125"]),
        (["other"], []),
    ],
)
def test_slurmd_pids(names: list[str], pids: list[str]) -> None:
    assert F.slurmd_pids(PGREP, names, "h1") == pids


def test_slurmd_pids_skips_blank_lines_and_takes_no_node_after_a_bare_n() -> None:
    assert F.slurmd_pids(["", "   ", "128 /usr/sbin/slurmd -D -N"], ["h1"], "h1") == ["128"]
    assert F.slurmd_pids([], ["h1"], "h1") == []


LIMITS = "Max locked memory         {}            unlimited            bytes"


def _probe(devinfo: str | None, pgrep: list[str], limits: list[str]) -> str:
    parts = [] if devinfo is None else ["== ibv_devinfo", devinfo]
    return "\n".join([*parts, "== slurmd", *pgrep, "== limits", *limits]) + "\n"


def test_nccl_probe_reads_the_ports_and_the_soft_limit_of_each_slurmd_of_the_host() -> None:
    stdout = _probe(
        IBV_DEVINFO,
        PGREP,
        [f"123 {LIMITS.format('unlimited')}", f"125 {LIMITS.format('8388608')}", f"126 {LIMITS.format('1')}"],
    )
    found = F.nccl_probe(stdout, ["node1", "h1"], "h1")  # 124 gave no limits line; 126 is another node's
    assert found["ib_ports"] == PORTS
    assert found["memlock"] == [{"pid": "123", "memlock": "unlimited"}, {"pid": "125", "memlock": "8388608"}]
    assert "hca_id: mlx5_0" in found["devinfo"] and "\n" not in found["devinfo"]


def test_nccl_probe_edge_cases() -> None:
    stdout = _probe(
        "  Failed to get IB devices list: Function not implemented\n",
        ["201 /usr/sbin/slurmd -D", "202 /usr/sbin/slurmd -D", "203 /usr/sbin/slurmd -D"],
        ["201 ?", "202 Max open files 1 2 files", ""],  # no such line: "?"; 203 was gone: left out
    )
    found = F.nccl_probe(stdout, [], "h1")
    assert found["ib_ports"] == []
    assert found["devinfo"] == "Failed to get IB devices list: Function not implemented"
    assert found["memlock"] == [{"pid": "201", "memlock": "?"}, {"pid": "202", "memlock": "?"}]
    assert F.nccl_probe("", [], "h1") == {"devinfo": "", "ib_ports": [], "memlock": []}
    assert F.nccl_probe(_probe(None, [], []), ["h1"], "h1") == {"devinfo": "", "ib_ports": [], "memlock": []}


# ---- nvidia_smi_gpus, service_states (roles/nvidia) --------------------------------------------


def test_nvidia_smi_gpus() -> None:
    lines = [
        "0, NVIDIA A100-SXM4-80GB, 535.154.05, 00000000:07:00.0, Enabled",
        "1, NVIDIA H200, 550.54.15, 00000000:0F:00.0, Disabled",
    ]
    assert F.nvidia_smi_gpus(lines) == [
        {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "driver_version": "535.154.05", "bus_id": "00000000:07:00.0",
         "persistence_mode": "Enabled"},
        {"index": 1, "name": "NVIDIA H200", "driver_version": "550.54.15", "bus_id": "00000000:0F:00.0",
         "persistence_mode": "Disabled"},
    ]


@pytest.mark.parametrize("line", ["No devices were found", "", "1,2,3,4,5", "0, a, b, c"])
def test_nvidia_smi_gpus_skips_lines_of_fewer_than_five_fields(line: str) -> None:
    assert F.nvidia_smi_gpus([line]) == []


def test_nvidia_smi_gpus_index_converts_like_jinjas_int() -> None:
    gpus = F.nvidia_smi_gpus(["x, a, b, c, d", "3.5, a, b, c, d, e", " 7, a, b, c, d"])
    assert [gpu["index"] for gpu in gpus] == [0, 3, 7]
    assert gpus[1]["persistence_mode"] == "d"  # a sixth field is ignored


def test_service_states() -> None:
    services = {
        "nvidia-persistenced.service": {"name": "nvidia-persistenced.service", "state": "running"},
        "nvidia-dcgm": {"name": "nvidia-dcgm", "state": "stopped"},  # service_facts without the .service suffix
        "nvidia-fabricmanager.service": {"name": "nvidia-fabricmanager.service"},  # no state
    }
    names = ["nvidia-persistenced", "nvidia-fabricmanager", "nvidia-dcgm", "absent"]
    assert F.service_states(names, services) == [
        "nvidia-persistenced=running",
        "nvidia-fabricmanager=not installed",
        "nvidia-dcgm=stopped",
        "absent=not installed",
    ]


def test_service_states_prefers_the_service_suffix_and_shows_any_state() -> None:
    services = {"x.service": {"state": "running"}, "x": {"state": "stopped"}, "y.service": {"state": None}, "z": "odd"}
    assert F.service_states(["x", "y", "z"], services) == ["x=running", "y=None", "z=not installed"]
    assert F.service_states([], services) == []
    assert F.service_states(["x"], {}) == ["x=not installed"]


def test_service_states_reports_started_units_running() -> None:
    services = {"a.service": {"state": "stopped"}, "b.service": {"state": "stopped"}}
    assert F.service_states(["a", "b", "c"], services, ["a", "c"]) == ["a=running", "b=stopped", "c=running"]
    assert F.service_states(["a"], services, []) == ["a=stopped"]


# ---- nvidia_probe (roles/nvidia tasks/detect.yml) ------------------------------------------------

PROBE_OK = (
    "smi 0\nmodule yes\nnvswitches 4\nnvml_plugin yes\n== nvidia-smi\n"
    "0, NVIDIA H200, 550.54.15, 00000000:0F:00.0, Enabled\n"
    "1, NVIDIA H200, 550.54.15, 00000000:1F:00.0, Enabled\n"
    "== ldconfig\n1000 libs found in cache `/etc/ld.so.cache'\n"
    "\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
    "\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6\n"
)


def test_nvidia_probe_of_a_working_driver() -> None:
    state = F.nvidia_probe(PROBE_OK)
    assert [gpu["bus_id"] for gpu in state["gpus"]] == ["00000000:0F:00.0", "00000000:1F:00.0"]
    assert state["driver_version"] == "550.54.15"
    assert state["driver_ok"] is True
    assert state["nvswitches"] == 4
    assert state["nvml_plugin"] is True
    assert state["ldconfig"] == "\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    assert F.ldconfig_lib_path(state["ldconfig"], "libnvidia-ml.so.1") == "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    assert F.ldconfig_lib_path(state["ldconfig"], "libnvidia-ml.so") == ""


@pytest.mark.parametrize(
    ("stdout", "stderr", "problem"),
    [
        ("smi -\nmodule no\nnvswitches 0\n== nvidia-smi\n", "",
         "nvidia-smi is not installed; no NVIDIA kernel module is loaded (/proc/driver/nvidia/version is missing)"),
        ("smi 0\nmodule yes\nnvswitches 0\n== nvidia-smi\nNo devices were found\n", "", "nvidia-smi lists no GPU"),
        ("smi 9\nmodule yes\nnvswitches 0\n== nvidia-smi\n\n  NVIDIA-SMI has failed\nmore\n", "ignored",
         "nvidia-smi exited 9: NVIDIA-SMI has failed"),
        ("smi 6\nmodule no\nnvswitches 0\n== nvidia-smi\n", "  \nNo devices found\n",
         "nvidia-smi exited 6: No devices found; no NVIDIA kernel module is loaded (/proc/driver/nvidia/version is missing)"),
        ("smi 255\nmodule yes\n== nvidia-smi\n", "", "nvidia-smi exited 255: "),
    ],
)
def test_nvidia_probe_says_why_the_driver_does_not_work(stdout: str, stderr: str, problem: str) -> None:
    state = F.nvidia_probe(stdout, stderr)
    assert state["driver_ok"] is False
    assert state["gpus"] == []
    assert state["driver_version"] == ""
    assert state["driver_problem"] == problem


def test_nvidia_probe_of_a_failed_exit_ignores_gpu_lines() -> None:
    state = F.nvidia_probe(PROBE_OK.replace("smi 0", "smi 3"))
    assert state["driver_ok"] is False
    assert state["driver_problem"].startswith("nvidia-smi exited 3: 0, NVIDIA H200")


def test_nvidia_probe_of_no_output() -> None:
    state = F.nvidia_probe("")
    assert state == {
        "gpus": [], "driver_version": "", "driver_ok": False,
        "driver_problem": "nvidia-smi is not installed; no NVIDIA kernel module is loaded "
        "(/proc/driver/nvidia/version is missing)",
        "nvswitches": 0, "nvml_plugin": False, "ldconfig": "",
    }


# ---- the filters and their users ----------------------------------------------------------------

ANSIBLE_FILES = sorted((REPO / "roles").rglob("*.yml")) + sorted((REPO / "roles").rglob("*.j2")) + sorted(
    (REPO / "playbooks").glob("*.yml")
)


def test_every_filter_is_used_by_a_role_or_playbook() -> None:
    text = "\n".join(path.read_text(encoding="utf-8") for path in ANSIBLE_FILES)
    unused = [name for name in F.FilterModule().filters() if f"| cluster_cli.slurm.{name}" not in text]
    assert not unused, f"filters no role or playbook uses: {unused}"


def test_the_roles_name_every_filter_of_the_collection_by_its_fully_qualified_name() -> None:
    # Ansible finds a collection's filters only by cluster_cli.slurm.NAME (ansible.cfg has no
    # filter_plugins path, and an installed collection has none either).
    short = re.compile(r"\|\s*(" + "|".join(F.FilterModule().filters()) + r")\b")
    for path in ANSIBLE_FILES:
        found = short.findall(path.read_text(encoding="utf-8"))
        assert not found, f"{path.relative_to(REPO)}: {found}: write cluster_cli.slurm.NAME"


def test_no_list_is_built_with_append_in_jinja() -> None:
    # {% set _ = x.append(...) %} loops belong in plugins/filter/cluster_filters.py, with a test here.
    for path in ANSIBLE_FILES:
        assert ".append(" not in path.read_text(encoding="utf-8"), f"{path.relative_to(REPO)}: use a filter"


LDCONFIG = (
    "3 libs found in cache `/etc/ld.so.cache'\n"
    "\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
    "\tlibnvidia-ml.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so\n"
    "\tlibnvidia-ml.so.1.extra (libc6,x86-64) => /opt/x/libnvidia-ml.so.1.extra\n"
)


@pytest.mark.parametrize(
    ("text", "library", "path"),
    [
        (LDCONFIG, "libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
        (LDCONFIG, "libnvidia-ml.so", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so"),
        (LDCONFIG.replace("\tlibnvidia-ml.so (", "\tlibother.so ("), "libnvidia-ml.so", ""),  # only .so.1: no match
        ("", "libnvidia-ml.so.1", ""),
    ],
)
def test_ldconfig_lib_path_matches_the_exact_library_name(text, library, path):
    assert F.ldconfig_lib_path(text, library) == path


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("# NCCL settings\nNCCL_IB_HCA=mlx5_0,mlx5_1\nNCCL_DEBUG=WARN\n", "mlx5_0,mlx5_1"),
        ("NCCL_IB_HCA==mlx5_0:1 \n", "=mlx5_0:1"),  # an exact-name list keeps its leading '='
        ("NCCL_DEBUG=WARN\n", ""),
        ("NCCL_IB_HCA=a\nNCCL_IB_HCA=b\n", "a"),  # NCCL keeps the first value it sets
    ],
)
def test_conf_value_reads_one_key_of_a_config_text(text, value):
    assert F.conf_value(text, "NCCL_IB_HCA") == value


@pytest.mark.parametrize(
    ("lines", "not_ready"),
    [
        (["node1|idle|Unknown|none", "node2|mixed|Unknown|none", "node3|allocated|Unknown|none"], []),
        (["node1|idle*|Unknown|none", "node2|idle|Unknown|none", "node3|idle|Unknown|none"], ["node1"]),  # not responding
        (["node1|drained|slurm|Low RealMemory", "node2|idle|Unknown|none"], ["node1", "node3"]),  # Slurm drained it; node3 unlisted
        (["node1|idle|slurm|Low RealMemory", "node2|idle|Unknown|none", "node3|idle|Unknown|none"], ["node1"]),  # a reason
        (["node1|down|Unknown|none", "node1|idle|Unknown|none", "node2|idle|Unknown|none", "node3|idle|Unknown|none"], []),  # last row wins
        # an operator's drain is theirs: ready as far as deploy is concerned, unless it does not respond
        (["node1|drained|root|disk swap", "node2|draining|alice|bad fan", "node3|idle|Unknown|none"], []),
        (["node1|drained*|root|disk swap", "node2|idle|Unknown|none", "node3|idle|Unknown|none"], ["node1"]),
        (["node1|drained|root|cluster-cli: maintenance", "node2|idle|Unknown|none", "node3|idle|Unknown|none"], []),
        # the health check's drain (as root) is a node that failed, not an operator's decision
        (["node1|drained|root|cluster-cli health: gpu /dev/nvidia1 missing", "node2|idle|Unknown|none",
          "node3|idle|Unknown|none"], ["node1"]),
    ],
)
def test_slurm_nodes_not_ready_follows_the_usable_state_rule(lines, not_ready):
    assert F.slurm_nodes_not_ready(["node1", "node2", "node3"], lines) == not_ready


def show_node(*nodes: tuple[str, str, str]) -> str:
    """``scontrol --oneliner show node`` lines (fields cut down) for (name, SlurmdStartTime, State)."""
    return "".join(f"NodeName={name} Arch=x86_64 CPUAlloc=0 State={state} SlurmdStartTime={start} "
                   f"LastBusyTime=2026-11-24T05:00:00 Reason=x [root@2026-11-24T05:00:00]\n"
                   for name, start, state in nodes)


T0, T1, T2 = "2026-11-24T05:00:00", "2026-11-24T05:10:03", "2026-11-24T05:10:04"
BEFORE = show_node(("node1", T0, "IDLE"), ("node2", T0, "MIXED"))


@pytest.mark.parametrize(
    ("after", "waiting"),
    [
        (BEFORE, ["node1", "node2"]),  # neither slurmd registered again yet
        (show_node(("node1", T1, "IDLE"), ("node2", T0, "MIXED")), ["node2"]),
        (show_node(("node1", T1, "IDLE"), ("node2", T2, "MIXED+DRAIN")), []),
        # a new start time, but slurmctld does not hear from it (either way of writing the flag)
        (show_node(("node1", T1, "IDLE+NOT_RESPONDING"), ("node2", T2, "IDLE*")), ["node1", "node2"]),
        (show_node(("node1", T1, "IDLE")), ["node2"]),  # node2 not listed at all
        ("", ["node1", "node2"]),  # scontrol failed
    ],
)
def test_slurmd_not_reregistered_waits_for_a_new_start_time_of_an_answering_node(after, waiting):
    assert F.slurmd_not_reregistered(BEFORE, after, ["node1", "node2"]) == waiting


def test_slurmd_not_reregistered_takes_a_node_unknown_before_once_it_answers():
    after = show_node(("node3", T1, "IDLE"))
    assert F.slurmd_not_reregistered(BEFORE, after, ["node3"]) == []
    assert F.slurmd_not_reregistered("", "", ["node3"]) == ["node3"]


# ---- slurm_conf_change (roles/slurm_common) ---------------------------------------------------

SLURM_CONF = (
    "ClusterName=test\nSelectType=select/cons_tres\nNodeName=node[1-2] CPUs=4\n"
    "PartitionName=debug Nodes=node[1-2] MaxTime=01:00:00\n"
)
ROLE_KEYS = {"restart_slurmctld", "restart_slurmd", "reconfigure"}


def slurped(files: dict[str, str | None]) -> dict[str, str | None]:
    """What roles/slurm_common's cluster_files run registers as ``contents``: each file's text by
    its path on the host, None for one that is not there."""
    return {f"/etc/slurm/{name}": text for name, text in files.items()}


def rendered(tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return str(tmp_path)


@pytest.mark.parametrize(
    ("old", "new", "version", "expected"),
    [
        ("MaxTime=01:00:00", "MaxTime=02:00:00", "22.05.8-4+deb12u3", (False, False, True)),
        ("select/cons_tres", "select/linear", "22.05.8-4+deb12u3", (True, True, False)),
        ("node[1-2]", "node[1-3]", "22.05.8-4+deb12u3", (True, True, False)),
        ("node[1-2]", "node[1-3]", "24.11.5-4+deb13u1", (False, False, True)),
        ("ClusterName=test", "clustername=test", "24.11.5-4+deb13u1", (False, False, False)),
    ],
)
def test_slurm_conf_change_gives_the_role_its_three_facts(tmp_path, old, new, version, expected) -> None:
    source = rendered(tmp_path, {"slurm.conf": SLURM_CONF.replace(old, new)})
    result = F.slurm_conf_change(slurped({"slurm.conf": SLURM_CONF}), source, version)
    assert (result["restart_slurmctld"], result["restart_slurmd"], result["reconfigure"]) == expected
    assert ROLE_KEYS <= set(result)


def test_slurm_conf_change_reads_only_the_files_read_and_a_missing_one_as_absent(tmp_path) -> None:
    source = rendered(tmp_path, {"slurm.conf": SLURM_CONF, "gres.conf": "Name=gpu File=/dev/nvidia0\n",
                                 "slurmdbd.conf": "DbdPort=6819\n"})
    result = F.slurm_conf_change(slurped({"slurm.conf": SLURM_CONF, "gres.conf": None}), source, "22.05.8")
    assert (result["restart_slurmctld"], result["restart_slurmd"], result["restart_slurmdbd"]) == (False, True, False)
    assert result["reasons"][0] == "gres.conf is new here: restart slurmd (its keys and the file rule)"
    assert result["reconfigure"], "slurmctld reads gres.conf too"


def test_slurm_conf_change_a_file_no_longer_rendered_is_removed(tmp_path) -> None:
    source = rendered(tmp_path, {"slurm.conf": SLURM_CONF})
    result = F.slurm_conf_change(
        slurped({"slurm.conf": SLURM_CONF, "topology.conf": "SwitchName=s1 Nodes=node[1-2]\n"}), source, "22.05.8"
    )
    assert result["impact"] == "reconfigure" and result["reasons"][0].startswith("topology.conf is removed")


@pytest.mark.parametrize("version", ["", "23.11.4-1"])
def test_slurm_conf_change_without_rules_for_the_version_uses_the_oldest_series(tmp_path, version) -> None:
    source = rendered(tmp_path, {"slurm.conf": SLURM_CONF.replace("node[1-2]", "node[1-3]")})
    result = F.slurm_conf_change(slurped({"slurm.conf": SLURM_CONF}), source, version)
    assert result["series"] == "22.05"
    assert (result["restart_slurmctld"], result["restart_slurmd"]) == (True, True)
    assert "the rules of 22.05, which restart the most, apply" in result["reasons"][0]


def test_slurm_conf_change_of_nothing_says_nothing(tmp_path) -> None:
    source = rendered(tmp_path, {"slurm.conf": SLURM_CONF})
    result = F.slurm_conf_change(slurped({"slurm.conf": SLURM_CONF}), source, "")
    assert result["impact"] == "none" and result["reasons"] == []


# ---- cluster_files items (roles/slurm_common) ---------------------------------------------------

def test_rendered_file_items_carry_the_control_node_text_for_the_host_path(tmp_path) -> None:
    source = rendered(tmp_path, {"slurm.conf": SLURM_CONF})
    assert F.rendered_file_items(["slurm.conf"], source, "/etc/slurm") == [
        {"dest": "/etc/slurm/slurm.conf", "content": SLURM_CONF, "owner": "root", "group": "root", "mode": "0644"}
    ]


def test_marker_file_items_are_empty_files_in_the_directory() -> None:
    assert [(item["dest"], item["content"]) for item in F.marker_file_items(["reconfigure"], "/var/lib/slurm/pending")] \
        == [("/var/lib/slurm/pending/reconfigure", "")]


def test_cluster_files_changes_names_new_different_and_removed_files_only() -> None:
    contents = {"/a": "same\n", "/b": "old\n", "/c": None, "/d": "gone\n", "/e": None}
    items = [{"dest": "/a", "content": "same\n"}, {"dest": "/b", "content": "new\n"}, {"dest": "/c", "content": ""}]
    assert F.cluster_files_changes(contents, items, ["/d", "/e"]) == ["/b", "/c", "/d"]


def test_directory_items_share_one_owner_group_and_mode() -> None:
    assert F.directory_items(["/a", "/b"], mode="0700") == [
        {"path": "/a", "owner": "root", "group": "root", "mode": "0700"},
        {"path": "/b", "owner": "root", "group": "root", "mode": "0700"},
    ]


# ---- keys_mismatched --------------------------------------------------------------------------

def _sums(*lines: str) -> dict:
    return {"cmd": ["sha256sum", "--", "/etc/munge/munge.key", "/etc/munge/.marker"], "stdout_lines": list(lines)}


def test_keys_mismatched_only_where_the_key_is_marked_and_differs() -> None:
    results = [
        _sums("aaa  /etc/munge/munge.key", "mmm  /etc/munge/.marker"),  # the control node's key
        _sums("bbb  /etc/munge/munge.key", "mmm  /etc/munge/.marker"),  # another key cluster-cli installed
        _sums("bbb  /etc/munge/munge.key"),  # another key, not cluster-cli's (the package made it)
        _sums("mmm  /etc/munge/.marker"),  # marked, key gone
        _sums(),  # a new host
    ]
    assert F.keys_mismatched(["h1", "h2", "h3", "h4", "h5"], results, "aaa") == ["h2"]


def test_keys_mismatched_reads_the_paths_from_the_command() -> None:
    # The marker's path is the command's last argument, whatever it is called.
    result = {"cmd": ["sha256sum", "--", "/k", "/m x"], "stdout_lines": ["bbb  /k", "ccc  /m x"]}
    assert F.keys_mismatched(["h"], [result], "aaa") == ["h"]
    assert F.keys_mismatched(["h"], [result], "bbb") == []


# ---- marked_block (roles/slurmd: pam_slurm_adopt in /etc/pam.d/sshd) ---------------------------

SSHD = "@include common-auth\naccount required pam_nologin.so\n@include common-account\n@include common-session\n"
PAM_MARKER = "cluster-cli: pam_slurm_adopt"
PAM_BLOCK = "account sufficient pam_access.so accessfile=/etc/a.conf\naccount required pam_slurm_adopt.so nodename=c1\n"
SSHD_ADOPTED = (
    "@include common-auth\naccount required pam_nologin.so\n@include common-account\n"
    "# BEGIN cluster-cli: pam_slurm_adopt\n" + PAM_BLOCK + "# END cluster-cli: pam_slurm_adopt\n@include common-session\n"
)


def _block(text: str | None, present: object = True, block: str = PAM_BLOCK) -> str | None:
    return F.marked_block(text, PAM_MARKER, block, "^@include common-account", present)


def test_marked_block_goes_after_the_last_line_insertafter_matches() -> None:
    assert _block(SSHD) == SSHD_ADOPTED
    twice = SSHD + "@include common-account\n"
    assert _block(twice) == SSHD + "@include common-account\n# BEGIN cluster-cli: pam_slurm_adopt\n" + PAM_BLOCK + (
        "# END cluster-cli: pam_slurm_adopt\n")


def test_marked_block_is_left_as_it_is_then_replaced_in_place() -> None:
    assert _block(SSHD_ADOPTED) == SSHD_ADOPTED
    other = PAM_BLOCK.replace("c1", "c2")
    assert _block(SSHD_ADOPTED, block=other) == SSHD_ADOPTED.replace("nodename=c1", "nodename=c2")


def test_marked_block_is_taken_out_when_not_present() -> None:
    assert _block(SSHD_ADOPTED, present=False) == SSHD
    assert _block(SSHD, present="false") == SSHD


def test_marked_block_without_the_insertafter_line_goes_at_the_end() -> None:
    assert _block("auth required pam_unix.so") == (
        "auth required pam_unix.so\n# BEGIN cluster-cli: pam_slurm_adopt\n" + PAM_BLOCK + "# END cluster-cli: pam_slurm_adopt\n")


def test_marked_block_before_a_line_goes_there_and_is_moved_there_from_elsewhere() -> None:
    """roles/slurmd's pam_slurm_adopt lines: before common-account, whose `sufficient` modules
    (libpam-sss's pam_localuser) would end the account stack before them."""
    before = SSHD.replace("@include common-account\n", "# BEGIN cluster-cli: pam_slurm_adopt\n" + PAM_BLOCK
                          + "# END cluster-cli: pam_slurm_adopt\n@include common-account\n")

    def block(text: str, present: object = True) -> str | None:
        return F.marked_block(text, PAM_MARKER, PAM_BLOCK, "", present, before="^@include common-account")

    assert block(SSHD) == before
    assert block(before) == before
    assert block(SSHD_ADOPTED) == before, "a block after common-account (an earlier deploy's) is moved"
    assert block(before, present=False) == SSHD
    assert block("auth required pam_unix.so\n") == (
        "auth required pam_unix.so\n# BEGIN cluster-cli: pam_slurm_adopt\n" + PAM_BLOCK + "# END cluster-cli: pam_slurm_adopt\n")


def test_marked_block_of_a_missing_file() -> None:
    assert _block(None, present=False) is None
    with pytest.raises(F.AnsibleFilterError, match="/etc/pam.d/sshd does not exist"):
        F.marked_block(None, PAM_MARKER, PAM_BLOCK, "^@include", True, "/etc/pam.d/sshd")


# ---- found_in (roles/slurmd: one find over the instances' and the pending directory) -----------


def test_found_in_keeps_the_names_right_in_the_directory() -> None:
    paths = ["/run/slurm/slurmd-a.pid", "/var/lib/slurm/pending/restart-slurmd", "/run/slurm/sub/slurmd-b.pid",
             "/run/slurmd-c.pid", "/x"]
    assert F.found_in(paths, "/run/slurm") == ["slurmd-a.pid"]
    assert F.found_in(paths, "/run/slurm/") == ["slurmd-a.pid"]
    assert F.found_in(paths, "/var/lib/slurm/pending") == ["restart-slurmd"]
    assert F.found_in(paths, "/") == ["x"]
    assert F.found_in([], "/run/slurm") == []


# ---- health_config_text (roles/slurmd: this host's health check file from the cluster's document) ----


HEALTH_DOCUMENT = {
    "check": {"reason_prefix": "cluster-cli health:", "min_free_mb": 1024, "mounts": []},
    "conf_dir": "/etc/slurm", "configless": True, "spool_dir": "/var/lib/slurm/slurmd", "work_dir": "/srv/t",
    "kinds": [{"cpus": 8, "real_memory_mb": 4096, "gpus": 2, "gpu_devices": ["/dev/nvidia0", "/dev/nvidia1"]}],
    "nodes": {"gpu01": 0, "gpu02": 0},
}


def test_health_config_text_is_the_host_s_nodes_out_of_the_document_as_plan_makes_it() -> None:
    from cluster_cli.health_expectations import HostHealthTexts

    text = F.health_config_text(json.dumps(HEALTH_DOCUMENT), ["gpu02"])
    assert text == HostHealthTexts(HEALTH_DOCUMENT).text(["gpu02"])
    assert json.loads(text)["nodes"] == {"gpu02": {
        "cpus": 8, "real_memory_mb": 4096, "gpus": 2, "gpu_devices": ["/dev/nvidia0", "/dev/nvidia1"],
        "slurm_conf": "/var/lib/slurm/slurmd/gpu02/conf-cache/slurm.conf",
        "free_space_dirs": ["/var/lib/slurm/slurmd/gpu02", "/srv/t"],
    }}


def test_health_config_text_names_a_node_the_document_does_not_know() -> None:
    with pytest.raises(F.AnsibleFilterError, match="health_config_text: .* no node 'gpu03': render again"):
        F.health_config_text(json.dumps(HEALTH_DOCUMENT), ["gpu01", "gpu03"])


# ---- storage_* (roles/storage_client) ---------------------------------------------------------

STORAGE_MARKER = "cluster-cli storage.mounts"


def _storage_mount(path: str, group: str, automount: bool = False) -> dict:
    unit = path.strip("/").replace("/", "-") + ".mount"
    return {"path": path, "hosts_group": group, "unit": unit,
            "automount_unit": unit.replace(".mount", ".automount") if automount else "",
            "fstab": f"n:{path} {path} nfs _netdev 0 0"}


def test_storage_host_mounts_are_those_of_the_hosts_groups() -> None:
    mounts = [_storage_mount("/home", "storage_mount_0"), _storage_mount("/data", "storage_mount_1")]
    assert F.storage_host_mounts(mounts, ["cluster", "storage_mount_1"]) == [mounts[1]]
    assert F.storage_host_mounts(mounts, ["cluster"]) == []


def test_storage_units_and_the_unit_each_mount_is_started_by() -> None:
    mounts = [_storage_mount("/home", "g"), _storage_mount("/data", "g", automount=True)]
    assert F.storage_unit_names(mounts) == ["home.mount", "data.mount", "data.automount"]
    assert F.storage_start_units(mounts) == ["home.mount", "data.automount"]


def test_storage_stale_units_are_the_marked_ones_not_wanted() -> None:
    found = ["/etc/systemd/system/home.mount", "/etc/systemd/system/old.mount", "/etc/systemd/system/old.automount"]
    assert F.storage_stale_units(found, ["home.mount"]) == ["old.automount", "old.mount"]


def test_storage_unit_paths_read_where_from_each_unit() -> None:
    contents = {"/u/old.mount": "# x\n[Mount]\nWhere=/old\n", "/u/old.automount": "[Automount]\nWhere=/old\n",
                "/u/bad.mount": "[Mount]\n", "/u/gone.mount": None}
    assert F.storage_unit_paths(contents, ["old.mount", "old.automount", "bad.mount", "gone.mount"], "/u") == {
        "/old": ["old.mount", "old.automount"]}


def test_storage_fstab_block_keeps_the_lines_of_busy_mounts_only() -> None:
    text = f"proc /proc proc defaults 0 0\n# BEGIN {STORAGE_MARKER}\nn:/a /a nfs x 0 0\nn:/b /b nfs x 0 0\n# END {STORAGE_MARKER}\n"
    assert F.storage_fstab_paths(text, STORAGE_MARKER) == ["/a", "/b"]
    assert F.storage_fstab_paths("proc /proc proc defaults 0 0\n", STORAGE_MARKER) == []
    assert F.storage_fstab_paths(None, STORAGE_MARKER) == []
    wanted = [_storage_mount("/c", "g")]
    assert F.storage_fstab_block(wanted, ["/b"], text, STORAGE_MARKER) == "n:/c /c nfs _netdev 0 0\nn:/b /b nfs x 0 0"
    assert F.storage_fstab_block(wanted, [], text, STORAGE_MARKER) == "n:/c /c nfs _netdev 0 0"
