"""Renderers: Slurm semantics of what they write, stable output, overrides, secrets, atomic writes."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from unit_helpers import BASE, SHIPPED_INVENTORIES, edit, load

from cluster_cli import hostlist
from cluster_cli.loader import load_cluster
from cluster_cli.render import BUILD_MARKER, NotABuildDirectory, RenderedFile, render_configs, write_files
from cluster_cli.render.ansible_inventory import inventory_document, render_ansible_inventory
from cluster_cli.render.cgroup_conf import render_cgroup_conf
from cluster_cli.render.gres_conf import render_gres_conf
from cluster_cli.render.nccl_conf import render_nccl_conf
from cluster_cli.render.slurm_conf import SLURM_CONF_DEFAULTS, node_lines, partition_lines, render_slurm_conf
from cluster_cli.render.slurmdbd_conf import InvalidSecret, render_slurmdbd_conf
from cluster_cli.render.topology_conf import render_topology_conf

PASSWORD = "Test_Password-0123456789"


def settings_of(text: str) -> list[str]:
    """The Key=Value lines of a rendered file, without comments and blank lines."""
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def global_lines(slurm_conf: str) -> list[str]:
    lines = settings_of(slurm_conf)
    return [line for line in lines if not line.startswith(("NodeName=", "PartitionName="))]


def keys_of(lines: list[str]) -> list[str]:
    return [line.split("=", 1)[0] for line in lines]


def render_all(cluster) -> dict[str, str]:
    files = {item.path: item.content for item in render_configs(cluster, PASSWORD)}
    files["ansible/inventory.yml"] = render_ansible_inventory(cluster)
    return files


# -- stable output ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_same_input_gives_byte_identical_output(name):
    first = render_all(load_cluster(SHIPPED_INVENTORIES[name]))
    second = render_all(load_cluster(SHIPPED_INVENTORIES[name]))
    assert first == second


def test_output_does_not_depend_on_hash_seed():
    # set and dict iteration order must not leak into the files
    script = (
        "import sys; from cluster_cli.loader import load_cluster; from cluster_cli.render import render_configs;"
        "from cluster_cli.render.ansible_inventory import render_ansible_inventory;"
        "c = load_cluster(sys.argv[1]);"
        "sys.stdout.write(''.join(f.content for f in render_configs(c, 'pw')) + render_ansible_inventory(c))"
    )
    path = str(SHIPPED_INVENTORIES["gpu-cluster"])
    outputs = {
        subprocess.run(
            [sys.executable, "-c", script, path],
            env={**os.environ, "PYTHONHASHSEED": seed, "HOME": "/home/operator"},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1


def test_global_keys_are_sorted_after_cluster_name_and_controllers():
    cluster = load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])
    lines = global_lines(render_slurm_conf(cluster))
    assert lines[:3] == [
        "ClusterName=atlas",
        "SlurmctldHost=ctl1(10.10.0.11)",
        "SlurmctldHost=ctl2(10.10.0.12)",
    ]
    keys = keys_of(lines[3:])
    assert keys == sorted(keys, key=str.lower)
    assert len(keys) == len({key.lower() for key in keys}), "no key twice"


@pytest.mark.parametrize("renderer", [render_cgroup_conf, render_nccl_conf])
def test_other_files_have_sorted_keys(renderer):
    cluster = load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])
    keys = keys_of(settings_of(renderer(cluster)))
    assert keys == sorted(keys, key=str.lower)


def test_slurmdbd_conf_keys_are_sorted():
    cluster = load_cluster(SHIPPED_INVENTORIES["minimal"])
    keys = keys_of(settings_of(render_slurmdbd_conf(cluster, PASSWORD)))
    assert keys == sorted(keys, key=str.lower)


def test_partition_options_are_sorted_after_the_fields():
    text = edit(
        BASE,
        "    default: true\n",
        "    default: true\n    options: {PriorityTier: 2, AllowGroups: ml, Hidden: yes}\n",
    )
    assert partition_lines(load(text)) == [
        (
            "PartitionName=all Nodes=dev[1-2],gpu[1-4] Default=YES MaxTime=INFINITE AllowGroups=ml"
            " DefMemPerGPU=1000 Hidden=YES PriorityTier=2 State=UP TRESBillingWeights=CPU=0.5,GRES/gpu=1"
        )
    ]


# -- overrides -------------------------------------------------------------------------------------


def test_override_replaces_adds_and_null_deletes_a_default():
    text = (
        BASE
        + "slurm:\n  conf:\n    KillWait: 5\n    Waittime: null\n    SchedulerParameters: bf_continue\n"
    )
    lines = global_lines(render_slurm_conf(load(text)))
    assert "KillWait=5" in lines and "KillWait=30" not in lines
    assert not any(line.startswith("Waittime=") for line in lines)
    assert "SchedulerParameters=bf_continue" in lines


def test_override_keys_match_defaults_without_case():
    text = BASE + "slurm:\n  conf:\n    killwait: 5\n    waittime: null\n"
    lines = global_lines(render_slurm_conf(load(text)))
    assert [line for line in lines if line.lower().startswith(("killwait=", "waittime="))] == ["KillWait=5"]


def test_null_deletes_a_derived_key_too():
    text = BASE + "slurm:\n  conf:\n    AccountingStorageTRES: null\n"
    assert not any(
        line.startswith("AccountingStorageTRES") for line in global_lines(render_slurm_conf(load(text)))
    )


def test_cgroup_override_and_delete():
    text = (
        BASE + "cgroup:\n  version: v1\n  overrides:\n    ConstrainSwapSpace: null\n    AllowedRAMSpace: 95\n"
    )
    assert settings_of(render_cgroup_conf(load(text))) == [
        "AllowedRAMSpace=95",
        "CgroupPlugin=cgroup/v1",
        "ConstrainCores=yes",
        "ConstrainDevices=yes",
        "ConstrainRAMSpace=yes",
    ]


@pytest.mark.parametrize(
    ("version", "plugin"), [("auto", "autodetect"), ("v1", "cgroup/v1"), ("v2", "cgroup/v2")]
)
def test_cgroup_plugin_follows_the_version(version, plugin):
    text = BASE + f"cgroup:\n  version: {version}\n"
    assert f"CgroupPlugin={plugin}" in settings_of(render_cgroup_conf(load(text)))


def test_partition_option_null_deletes_state_up():
    text = edit(BASE, "    default: true\n", "    default: true\n    options: {State: null}\n")
    assert partition_lines(load(text)) == [
        "PartitionName=all Nodes=dev[1-2],gpu[1-4] Default=YES MaxTime=INFINITE DefMemPerGPU=1000"
        " TRESBillingWeights=CPU=0.5,GRES/gpu=1"
    ]
    text = edit(BASE, "    default: true\n", "    default: true\n    options: {state: DOWN}\n")
    assert partition_lines(load(text)) == [
        "PartitionName=all Nodes=dev[1-2],gpu[1-4] Default=YES MaxTime=INFINITE DefMemPerGPU=1000 State=DOWN"
        " TRESBillingWeights=CPU=0.5,GRES/gpu=1"
    ]


def test_yaml_booleans_become_slurm_words():
    text = BASE + "slurm:\n  conf:\n    DisableRootJobs: yes\n    EnforcePartLimits: no\n"
    lines = global_lines(render_slurm_conf(load(text)))
    assert "DisableRootJobs=YES" in lines and "EnforcePartLimits=NO" in lines


def test_the_expert_defaults_from_the_field_notes():
    lines = global_lines(render_slurm_conf(load(BASE)))
    for expected in (
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "GresTypes=gpu",
        "AccountingStorageTRES=gres/gpu,gres/gpu:a100",
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/affinity,task/cgroup",
        "JobAcctGatherType=jobacct_gather/cgroup",
        "PropagateResourceLimitsExcept=MEMLOCK",
        "KillOnBadExit=1",
        "ReturnToService=1",
        "AuthType=auth/munge",
    ):
        assert expected in lines
    assert SLURM_CONF_DEFAULTS["PrologFlags"] == "Contain"  # Contain implies Alloc


# -- slurm.conf: nodes, controllers, accounting ----------------------------------------------------


def test_node_lines_compress_names_addresses_and_ports():
    assert node_lines(load(BASE)) == [
        (
            "NodeName=gpu[1-4] NodeAddr=10.0.1.[1-4] CPUs=16 Sockets=2 CoresPerSocket=8 ThreadsPerCore=1 "
            "RealMemory=64000 Gres=gpu:a100:2 State=UNKNOWN"
        ),
        (
            "NodeName=dev[1-2] NodeAddr=10.0.0.2 Port=[17001-17002] NodeHostname=box CPUs=2 Sockets=1 "
            "CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1000 Gres=gpu:1 State=UNKNOWN"
        ),
    ]


def test_node_lines_fall_back_to_one_line_per_node_when_addresses_do_not_line_up():
    # Slurm pairs NodeName and NodeAddr lists position by position: 10.0.1.[1-4] sorted would be wrong
    text = edit(BASE, "addresses: 10.0.1.[1-4]", "addresses: 10.0.1.[9,1-3]")
    lines = node_lines(load(text))
    assert [line.split(" ")[:2] for line in lines[:4]] == [
        ["NodeName=gpu1", "NodeAddr=10.0.1.9"],
        ["NodeName=gpu2", "NodeAddr=10.0.1.1"],
        ["NodeName=gpu3", "NodeAddr=10.0.1.2"],
        ["NodeName=gpu4", "NodeAddr=10.0.1.3"],
    ]


def test_node_names_without_addresses_get_no_node_addr():
    text = edit(BASE, "    addresses: 10.0.1.[1-4]\n", "")
    assert node_lines(load(text))[0].startswith("NodeName=gpu[1-4] CPUs=16 ")


def test_declared_host_address_wins_for_a_compute_node():
    text = edit(BASE, "  - name: box\n", "  - name: gpu3\n    address: 10.7.7.7\n  - name: box\n")
    lines = node_lines(load(text))
    assert [line.split(" ")[:2] for line in lines[:4]] == [
        ["NodeName=gpu1", "NodeAddr=10.0.1.1"],
        ["NodeName=gpu2", "NodeAddr=10.0.1.2"],
        ["NodeName=gpu3", "NodeAddr=10.7.7.7"],
        ["NodeName=gpu4", "NodeAddr=10.0.1.4"],
    ]


def test_node_attributes_cpus_features_weight_and_cpu_only():
    text = edit(
        BASE,
        "    real_memory_mb: 64000\n",
        "    real_memory_mb: 64000\n    cpus: 12\n    threads_per_core: 2\n    features: [ib, a100]\n    weight: 5\n",
    )
    text = edit(text, "    gpus:\n      count: 1\n      devices: /dev/fake[0-1]\n      fake: true\n", "")
    gpu_line, dev_line = node_lines(load(text))
    assert gpu_line.endswith(
        "CPUs=12 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=64000 Gres=gpu:a100:2 Feature=ib,a100 Weight=5 State=UNKNOWN"
    )
    assert "Gres=" not in dev_line


def test_controllers_accounting_and_topology_plugin():
    text = (
        edit(BASE, "  primary: head\n", "  primary: head\n  backup: gpu1\n  port: 7817\n")
        + "topology:\n  plugin: block\n  blocks:\n    - name: b1\n      nodes: gpu[1-4],dev[1-2]\n"
    )
    lines = global_lines(render_slurm_conf(load(text)))
    assert lines[1:3] == ["SlurmctldHost=head(10.0.0.1)", "SlurmctldHost=gpu1(10.0.1.1)"]
    assert "SlurmctldPort=7817" in lines
    assert "TopologyPlugin=topology/block" in lines
    assert {
        "AccountingStorageType=accounting_storage/slurmdbd",
        "AccountingStorageHost=10.0.0.1",
        "AccountingStoragePort=6819",
    } <= set(lines)


def test_no_accounting_lines_without_accounting():
    text = edit(BASE, "accounting:\n  host: head\n", "accounting:\n  enabled: false\n")
    cluster = load(text)
    assert not any(line.startswith("AccountingStorage") for line in global_lines(render_slurm_conf(cluster)))
    assert render_slurmdbd_conf(cluster, PASSWORD) is None
    assert "slurm/slurmdbd.conf" not in {item.path for item in render_configs(cluster, PASSWORD)}


def test_paths_come_from_the_model():
    text = (
        BASE
        + "slurm:\n  user: root\n  slurmd_port: 7000\n  paths:\n    state_dir: /x/state\n    spool_dir: /x/spool\n    log_dir: /x/log\n    run_dir: /x/run\n"
    )
    lines = global_lines(render_slurm_conf(load(text)))
    assert {
        "SlurmUser=root",
        "SlurmdPort=7000",
        "StateSaveLocation=/x/state",
        "SlurmdSpoolDir=/x/spool/%n",
        "SlurmctldLogFile=/x/log/slurmctld.log",
        "SlurmdLogFile=/x/log/slurmd-%n.log",
        "SlurmctldPidFile=/x/run/slurmctld.pid",
        "SlurmdPidFile=/x/run/slurmd-%n.pid",
    } <= set(lines)


def test_every_node_is_in_exactly_one_node_line_and_partitions_name_real_nodes():
    cluster = load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])
    named = [
        name
        for line in node_lines(cluster)
        for name in hostlist.expand(line.split(" ")[0][len("NodeName=") :])
    ]
    assert sorted(named) == sorted(node.name for node in cluster.nodes)
    for line in partition_lines(cluster):
        members = hostlist.expand(line.split(" ")[1][len("Nodes=") :])
        assert set(members) <= set(named)


# -- gres.conf -----------------------------------------------------------------------------------


def test_gres_lines():
    text = edit(
        BASE,
        "  - name: dev\n",
        "  - name: big\n    nodes: big[1-2]\n    cores_per_socket: 4\n    real_memory_mb: 10\n    gpus:\n      count: 8\n      autodetect: nvml\n  - name: dev\n",
    )
    text = edit(text, "nodes: [gpu, dev]", "nodes: [gpu, dev, big]")
    assert settings_of(render_gres_conf(load(text))) == [
        "NodeName=gpu[1-4] Name=gpu Type=a100 File=/dev/nvidia[0-1]",
        "NodeName=big[1-2] AutoDetect=nvml",
        # %n is not expanded in File=: one line per single-host node, its own device
        "NodeName=dev1 Name=gpu File=/dev/fake0",
        "NodeName=dev2 Name=gpu File=/dev/fake1",
    ]


def test_gres_never_mixes_autodetect_and_files_for_one_node():
    for name in SHIPPED_INVENTORIES:
        lines = settings_of(render_gres_conf(load_cluster(SHIPPED_INVENTORIES[name])))
        seen: dict[str, set[str]] = {}
        for line in lines:
            nodes = hostlist.expand(line.split(" ")[0][len("NodeName=") :])
            kind = "auto" if "AutoDetect=" in line else "file"
            for node in nodes:
                seen.setdefault(node, set()).add(kind)
        assert all(len(kinds) == 1 for kinds in seen.values()), name


# -- topology.conf -------------------------------------------------------------------------------


def test_tree_topology():
    text = (
        BASE
        + "topology:\n  plugin: tree\n  switches:\n    - name: leaf1\n      nodes: gpu[3-4],gpu[1-2]\n      link_speed: 100\n    - name: leaf2\n      nodes: dev[1-2]\n    - name: spine\n      switches: leaf2,leaf1\n"
    )
    assert settings_of(render_topology_conf(load(text))) == [
        "SwitchName=leaf1 Nodes=gpu[1-4] LinkSpeed=100",
        "SwitchName=leaf2 Nodes=dev[1-2]",
        "SwitchName=spine Switches=leaf[1-2]",
    ]


def test_block_topology():
    text = (
        BASE
        + "topology:\n  plugin: block\n  blocks:\n    - name: b1\n      nodes: gpu[1-4]\n    - name: b2\n      nodes: dev[1-2]\n  block_sizes: [2, 4]\n"
    )
    assert settings_of(render_topology_conf(load(text))) == [
        "BlockName=b1 Nodes=gpu[1-4]",
        "BlockName=b2 Nodes=dev[1-2]",
        "BlockSizes=2,4",
    ]


def test_no_topology_file_without_topology():
    cluster = load(BASE)
    assert render_topology_conf(cluster) is None
    assert "slurm/topology.conf" not in {item.path for item in render_configs(cluster, PASSWORD)}


# -- secrets ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_the_database_password_is_only_in_slurmdbd_conf(name, monkeypatch):
    # and the job templates, only for a cluster with login hosts, are all that is executable
    monkeypatch.setenv("HOME", "/home/operator")
    cluster = load_cluster(SHIPPED_INVENTORIES[name])
    files = render_configs(cluster, PASSWORD)
    files.append(RenderedFile("ansible/inventory.yml", render_ansible_inventory(cluster)))
    holders = {item.path for item in files if PASSWORD in item.content}
    assert holders == {"slurm/slurmdbd.conf"}
    (slurmdbd,) = [item for item in files if item.path == "slurm/slurmdbd.conf"]
    assert slurmdbd.mode == 0o600 and slurmdbd.secret
    assert f"StoragePass={PASSWORD}" in settings_of(slurmdbd.content)
    assert not any(item.secret for item in files if item is not slurmdbd)
    # world-readable; executable only the job templates a user runs with bash
    with_login = bool(cluster.inventory.login)
    assert {item.path: item.mode for item in files if item.mode != 0o644 and item is not slurmdbd} == {
        f"examples/{name}": 0o755 for name in ("chain.sh", "interactive.sh", "submit-sweep.sh") if with_login
    }


@pytest.mark.parametrize(
    "password", ["", "has#hash", "has space", "tab\there", 'quo"te', "quo'te", "new\nline"]
)
def test_passwords_slurmdbd_conf_cannot_carry(password):
    with pytest.raises(InvalidSecret):
        render_slurmdbd_conf(load(BASE), password)


# -- nccl.conf -------------------------------------------------------------------------------------


def test_nccl_conf():
    text = BASE + "nccl:\n  env:\n    NCCL_SOCKET_IFNAME: eth0\n    NCCL_IB_DISABLE: '1'\n"
    assert settings_of(render_nccl_conf(load(text))) == ["NCCL_IB_DISABLE=1", "NCCL_SOCKET_IFNAME=eth0"]
    assert settings_of(render_nccl_conf(load(BASE))) == []


# -- ansible inventory ---------------------------------------------------------------------------


def test_ansible_groups_and_host_variables(monkeypatch):
    monkeypatch.setenv("HOME", "/home/operator")
    text = edit(BASE, "  primary: head\n", "  primary: gpu2\n  backup: head\n")
    text = edit(
        text,
        "    address: 10.0.0.2\n",
        "    address: 10.0.0.2\n    connection: local\n    python: /opt/py/bin/python3\n",
    )
    text = edit(
        text,
        "cluster_name: test\n",
        "cluster_name: test\nssh:\n  user: admin\n  port: 2222\n  private_key: ~/.ssh/key\n  common_args: -o ProxyJump=bastion\n",
    )
    document = inventory_document(load(text))
    cluster_group = document["all"]["children"]["cluster"]
    children = cluster_group["children"]
    # primary first, then the backup
    assert list(children["slurm_controller"]["hosts"]) == ["gpu2", "head"]
    assert list(children["slurm_database"]["hosts"]) == ["head"]
    assert sorted(children["slurm_compute"]["hosts"]) == ["box", "gpu1", "gpu2", "gpu3", "gpu4"]
    assert list(children["slurm_login"]["hosts"]) == ["head"]
    assert sorted(children["training_env"]["hosts"]) == ["box", "gpu1", "gpu2", "gpu3", "gpu4", "head"]
    assert set(children) == {
        "slurm_controller",
        "slurm_database",
        "slurm_compute",
        "slurm_login",
        "training_env",
        "training_env_shared",
        "slurm_nvml",
        "monitoring",
        "node_exporter",
        "slurm_exporter",
        "gpu_exporter",
        "sssd",
        "storage_client",
        "nfs_server",
    }
    assert children["slurm_nvml"] == {"hosts": {}}, "no group autodetects"
    assert children["sssd"] == {"hosts": {}}, "no directory: no SSSD anywhere"
    assert children["monitoring"] == children["node_exporter"] == children["slurm_exporter"] == {"hosts": {}}, (
        "no monitoring host: no monitoring daemon anywhere")
    hosts = cluster_group["hosts"]
    assert hosts["head"] == {
        "ansible_python_interpreter": "/usr/bin/python3",
        "ansible_host": "10.0.0.1",
        "ansible_user": "admin",
        "ansible_port": 2222,
        "ansible_ssh_private_key_file": "/home/operator/.ssh/key",
        "ansible_ssh_common_args": "-o ProxyJump=bastion",
        # an SSH user that is not root: every task through sudo
        "ansible_become": True,
        "slurmd_nodes": [],
    }
    assert hosts["box"] == {
        "ansible_python_interpreter": "/opt/py/bin/python3",
        "ansible_connection": "local",
        "slurmd_nodes": [
            {"name": "dev1", "port": 17001, "fake_gpus": [{"path": "/dev/fake0", "minor": 0}]},
            {"name": "dev2", "port": 17002, "fake_gpus": [{"path": "/dev/fake1", "minor": 1}]},
        ],
        # two nodes of one fake GPU each
        "nvidia_gpu_count": 2,
        "nvidia_gpu_fake": True,
        "nvidia_nvml_autodetect": False,
    }
    assert hosts["gpu3"]["ansible_host"] == "10.0.1.3"
    assert hosts["gpu3"]["slurmd_nodes"] == [{"name": "gpu3", "port": 6818, "fake_gpus": []}]
    assert (hosts["gpu3"]["nvidia_gpu_count"], hosts["gpu3"]["nvidia_gpu_fake"]) == (2, False)


def test_ansible_inventory_without_accounting_has_no_database_host():
    text = edit(BASE, "accounting:\n  host: head\n", "accounting:\n  enabled: false\n")
    children = inventory_document(load(text))["all"]["children"]["cluster"]["children"]
    assert not children.get("slurm_database", {}).get("hosts")


def test_rendered_ansible_inventory_is_the_document():
    cluster = load(BASE)
    text = render_ansible_inventory(cluster)
    assert text.startswith("# Ansible inventory for cluster 'test', generated by cluster-cli: do not edit.\n")
    assert yaml.safe_load(text) == inventory_document(cluster)


# -- writing the build directory -------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def some_files(tag: str) -> list[RenderedFile]:
    return [
        RenderedFile("slurm/slurm.conf", f"slurm {tag}\n"),
        RenderedFile("slurm/slurmdbd.conf", f"secret {tag}\n", mode=0o600, secret=True),
        RenderedFile("ansible/inventory.yml", f"inventory {tag}\n"),
    ]


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    return {
        str(path.relative_to(directory)): (path.read_text(), mode(path))
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def test_write_files_modes(tmp_path):
    target = tmp_path / "state" / "build"
    old_umask = os.umask(0o022)
    try:
        write_files(target, some_files("one"))
    finally:
        os.umask(old_umask)
    assert mode(target) == 0o700
    assert mode(target / "slurm") == 0o700 and mode(target / "ansible") == 0o700
    assert snapshot(target) == {
        BUILD_MARKER: ("cluster-cli made this directory and replaces all of it but slurm-build/ on every render.\n", 0o644),
        "ansible/inventory.yml": ("inventory one\n", 0o644),
        "slurm/slurm.conf": ("slurm one\n", 0o644),
        "slurm/slurmdbd.conf": ("secret one\n", 0o600),
    }


def test_write_files_replaces_the_whole_directory(tmp_path):
    target = tmp_path / "build"
    write_files(target, some_files("one") + [RenderedFile("slurm/topology.conf", "old\n")])
    write_files(target, some_files("two"))
    assert set(snapshot(target)) == {BUILD_MARKER, "ansible/inventory.yml", "slurm/slurm.conf", "slurm/slurmdbd.conf"}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["build"], "no staging or old copies left"


def test_a_failure_while_writing_leaves_the_previous_build_intact(tmp_path, monkeypatch):
    target = tmp_path / "build"
    write_files(target, some_files("one"))
    before = snapshot(target)
    real_open = os.open
    calls = {"count": 0}

    def failing_open(path, flags, *args, **kwargs):
        calls["count"] += 1
        if calls["count"] == 2:
            raise OSError(28, "No space left on device")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(OSError, match="No space left"):
        write_files(target, some_files("two"))
    monkeypatch.undo()
    assert snapshot(target) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["build"]


def test_hosts_whose_groups_autodetect_form_the_slurm_nvml_group():
    text = edit(BASE, "      type: a100\n      devices: /dev/nvidia[0-1]\n", "      type: a100\n      autodetect: nvml\n")
    document = inventory_document(load(text))
    cluster_group = document["all"]["children"]["cluster"]
    assert sorted(cluster_group["children"]["slurm_nvml"]["hosts"]) == ["gpu1", "gpu2", "gpu3", "gpu4"]
    assert cluster_group["hosts"]["gpu1"]["nvidia_nvml_autodetect"] is True
    assert cluster_group["hosts"]["box"]["nvidia_nvml_autodetect"] is False
    assert "nvidia_gpu_count" not in cluster_group["hosts"]["head"], "a host without GPUs keeps the role defaults"


def test_write_files_keeps_the_fetched_slurm_build_and_nothing_else_a_deploy_added(tmp_path):
    target = tmp_path / "build"
    write_files(target, some_files("one"))
    (target / "slurm-build").mkdir()
    (target / "slurm-build" / "build-info.json").write_text("{}\n")
    (target / "stray").mkdir()
    write_files(target, some_files("two"))
    assert (target / "slurm-build" / "build-info.json").read_text() == "{}\n"
    assert not (target / "stray").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["build"], "no staging or old copies left"


def test_a_failure_while_swapping_in_leaves_the_previous_build_intact(tmp_path, monkeypatch):
    target = tmp_path / "build"
    write_files(target, some_files("one"))
    before = snapshot(target)
    real_rename = Path.rename

    def failing_rename(self, destination):
        # only the move of the freshly written staging directory onto the target fails
        if Path(destination) == target.resolve() and not self.name.startswith(".build.old."):
            raise OSError(5, "Input/output error")
        return real_rename(self, destination)

    monkeypatch.setattr(Path, "rename", failing_rename)
    with pytest.raises(OSError, match="Input/output error"):
        write_files(target, some_files("two"))
    monkeypatch.undo()
    assert snapshot(target) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["build"]


def test_a_failure_on_the_first_build_leaves_nothing(tmp_path, monkeypatch):
    target = tmp_path / "build"

    real_open = os.open
    calls = {"count": 0}

    def failing_open(path, flags, *args, **kwargs):
        calls["count"] += 1
        if calls["count"] == 1:
            raise OSError(28, "No space left on device")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(OSError):
        write_files(target, some_files("one"))
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_write_files_refuses_a_directory_it_did_not_make(tmp_path):
    target = tmp_path / "home"
    target.mkdir()
    (target / "notes.txt").write_text("keep me\n")
    with pytest.raises(NotABuildDirectory, match="is not empty and cluster-cli did not make it"):
        write_files(target, some_files("one"))
    assert sorted(path.name for path in target.iterdir()) == ["notes.txt"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home"], "no staging left"


def test_write_files_refuses_a_file_in_place_of_the_directory(tmp_path):
    (tmp_path / "build").write_text("not a directory\n")
    with pytest.raises(NotABuildDirectory, match="is not a directory"):
        write_files(tmp_path / "build", some_files("one"))
    assert (tmp_path / "build").read_text() == "not a directory\n"


def test_write_files_fills_an_empty_directory(tmp_path):
    (tmp_path / "build").mkdir()
    write_files(tmp_path / "build", some_files("one"))
    assert (tmp_path / "build" / BUILD_MARKER).is_file()


def test_write_files_replaces_a_build_from_before_the_marker(tmp_path):
    target = tmp_path / "build"
    write_files(target, some_files("one") + [RenderedFile("ansible/cluster_vars.yml", "# Generated by cluster-cli\n")])
    (target / BUILD_MARKER).unlink()
    write_files(target, some_files("two"))
    assert (target / "slurm" / "slurm.conf").read_text() == "slurm two\n"


def test_an_unmarked_directory_with_other_entries_is_not_taken_for_a_build(tmp_path):
    target = tmp_path / "build"
    write_files(target, some_files("one") + [RenderedFile("ansible/cluster_vars.yml", "# Generated by cluster-cli\n")])
    (target / BUILD_MARKER).unlink()
    (target / "thesis.tex").write_text("keep me\n")
    with pytest.raises(NotABuildDirectory):
        write_files(target, some_files("two"))
    assert (target / "thesis.tex").read_text() == "keep me\n"


def test_an_old_copy_of_the_same_name_is_not_deleted(tmp_path):
    # an earlier version swapped the previous build out to the fixed name .build.old and deleted it
    target = tmp_path / "build"
    (tmp_path / ".build.old").mkdir()
    (tmp_path / ".build.old" / "mine.txt").write_text("keep me\n")
    write_files(target, some_files("one"))
    write_files(target, some_files("two"))
    assert (tmp_path / ".build.old" / "mine.txt").read_text() == "keep me\n"


def test_fake_gpu_minors_follow_the_device_number_so_they_survive_a_node_removal(tmp_path: Path) -> None:
    # node3 removed from node[1-4]: node4 keeps /dev/fake-gpu/nvidia3 and its minor 3 (not position 2),
    # so the device made for it earlier is still the right one.
    from cluster_cli.render.ansible_inventory import render_ansible_inventory

    text = (Path(__file__).resolve().parents[2] / "inventories" / "local" / "inventory.yaml").read_text()
    text = text.replace("nodes: node[1-3]", "nodes: node[1-2,4]").replace("nvidia[0-2]", "nvidia[0-1,3]")
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    document = yaml.safe_load(render_ansible_inventory(load_cluster(path)))
    host = document["all"]["children"]["cluster"]["hosts"]["localhost"]
    minors = {node["name"]: [gpu["minor"] for gpu in node["fake_gpus"]] for node in host["slurmd_nodes"]}
    assert minors == {"node1": [0], "node2": [1], "node4": [3]}
