"""Every cross-check of cluster.py: triggered on purpose, reported as the exact file:line: field: message."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, FILE, edit, line_of, load, problem, problems

# -- hosts -----------------------------------------------------------------------------------------


def test_host_declared_twice():
    text = edit(BASE, "  - name: box\n", "  - name: head\n  - name: box\n")
    # the second entry, on the line after the first one's address
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'address: 10.0.0.1') + 1}: hosts[1].name: host 'head' is declared twice"
    ]


def test_host_without_a_role():
    text = edit(BASE, "  - name: box\n", "  - name: spare\n  - name: box\n")
    assert problems(text) == [
        problem(
            text,
            "name: spare",
            "hosts[1].name",
            "host 'spare' has no role (controller, database, login, nodes)",
        )
    ]


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("  primary: head", "  primary: nowhere", "controllers.primary"),
        ("  host: head\nlogin", "  host: nowhere\nlogin", "accounting.host"),
        ("login: [head]", "login: [head, nowhere]", "login[1]"),
    ],
)
def test_role_on_an_unknown_host(old, new, field):
    text = edit(BASE, old, new)
    snippet = "nowhere"
    assert problems(text) == [
        problem(text, snippet, field, "host 'nowhere' is neither declared under hosts nor a compute node")
    ]


def test_backup_controller_unknown_and_same_as_primary():
    text = edit(BASE, "  primary: head\n", "  primary: head\n  backup: nowhere\n")
    assert problems(text) == [
        problem(
            text,
            "backup: nowhere",
            "controllers.backup",
            "host 'nowhere' is neither declared under hosts nor a compute node",
        )
    ]
    text = edit(BASE, "  primary: head\n", "  primary: head\n  backup: head\n")
    assert problems(text) == [
        problem(
            text, "backup: head", "controllers.backup", "the backup controller must differ from the primary"
        )
    ]


def test_a_compute_node_may_be_the_controller():
    text = edit(BASE, "  primary: head", "  primary: gpu1")
    cluster = load(text)
    assert {"controller", "compute"} <= cluster.hosts["gpu1"].roles


def test_accounting_needs_a_host():
    text = edit(BASE, "accounting:\n  host: head\n", "accounting:\n  enabled: true\n")
    assert problems(text) == [
        problem(text, "accounting:", "accounting.host", "accounting is enabled: name the database host")
    ]


def test_accounting_off_needs_no_host():
    text = edit(BASE, "accounting:\n  host: head\n", "accounting:\n  enabled: false\n")
    assert "database" not in load(text).hosts["head"].roles


def test_login_listed_twice():
    text = edit(BASE, "login: [head]", "login: [head, head]")
    assert problems(text) == [problem(text, "login:", "login[1]", "login host 'head' is listed twice")]


# -- node groups -----------------------------------------------------------------------------------


def test_node_group_declared_twice():
    text = edit(BASE, "  - name: dev\n    nodes: dev[1-2]\n", "  - name: gpu\n    nodes: dev[1-2]\n")
    text = edit(text, "nodes: [gpu, dev]", "nodes: [gpu]")
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'nodes: dev[1-2]') - 1}: node_groups[1].name: node group 'gpu' is declared twice"
    ]


def test_invalid_node_names():
    text = edit(BASE, "nodes: dev[1-2]", "nodes: dev[1-2]-")
    assert problems(text) == [
        problem(
            text, "nodes: dev[1-2]-", "node_groups[1].nodes", "node name 'dev1-' is not a valid host name"
        ),
        problem(
            text, "nodes: dev[1-2]-", "node_groups[1].nodes", "node name 'dev2-' is not a valid host name"
        ),
    ]


def test_node_in_two_groups():
    text = edit(BASE, "nodes: dev[1-2]", "nodes: gpu4,dev2")
    assert problems(text) == [
        problem(text, "nodes: gpu4,dev2", "node_groups[1].nodes", "node 'gpu4' is also in node_groups[0]")
    ]


def test_node_twice_in_one_group():
    text = edit(BASE, "nodes: dev[1-2]", "nodes: dev[1-2],dev1")
    text = edit(text, "devices: /dev/fake[0-1]", "devices: /dev/fake[0-2]")
    assert problems(text) == [
        problem(text, "nodes: dev[1-2],dev1", "node_groups[1].nodes", "node 'dev1' is also in node_groups[1]")
    ]


def test_group_name_that_is_also_a_node_name():
    text = edit(BASE, "nodes: dev[1-2]", "nodes: dev1,gpu")
    assert problems(text) == [
        problem(text, "node_groups:", "node_groups", "'gpu' is both a node group and a node name")
    ]


def test_more_cpus_than_the_topology_gives():
    text = edit(BASE, "    cores_per_socket: 8\n", "    cores_per_socket: 8\n    cpus: 17\n")
    assert problems(text) == [
        problem(text, "cpus: 17", "node_groups[0].cpus", "17 CPUs but sockets x cores x threads is only 16")
    ]
    assert problems(edit(BASE, "    cores_per_socket: 8\n", "    cores_per_socket: 8\n    cpus: 16\n")) == []


# -- single-host and multi-host groups ---------------------------------------------------------


def test_single_host_group_on_an_undeclared_host():
    text = edit(BASE, "    host: box\n", "    host: elsewhere\n")
    assert problems(text) == [
        # box lost its only role
        problem(
            text,
            "  - name: box",
            "hosts[1].name",
            "host 'box' has no role (controller, database, login, nodes)",
        ),
        problem(
            text, "host: elsewhere", "node_groups[1].host", "host 'elsewhere' is not declared under hosts"
        ),
    ]


def test_single_host_group_needs_base_port():
    text = edit(BASE, "    base_port: 17001\n", "")
    assert problems(text) == [
        problem(
            text,
            "  - name: dev",
            "node_groups[1].base_port",
            "single-host groups need base_port (one slurmd port per node)",
        )
    ]


def test_single_host_ports_may_not_pass_65535():
    text = edit(BASE, "base_port: 17001", "base_port: 65535")
    assert problems(text) == [
        problem(text, "base_port: 65535", "node_groups[1].base_port", "2 nodes from port 65535 pass 65535")
    ]
    assert problems(edit(BASE, "base_port: 17001", "base_port: 65534")) == []


def test_single_host_group_takes_no_addresses():
    text = edit(BASE, "    base_port: 17001\n", "    base_port: 17001\n    addresses: 10.9.9.[1-2]\n")
    assert problems(text) == [
        problem(
            text,
            "addresses: 10.9.9",
            "node_groups[1].addresses",
            "single-host nodes share their host's address; remove addresses",
        )
    ]


def test_base_port_only_for_single_host_groups():
    text = edit(BASE, "    addresses: 10.0.1.[1-4]\n", "    addresses: 10.0.1.[1-4]\n    base_port: 18000\n")
    assert problems(text) == [
        problem(
            text,
            "base_port: 18000",
            "node_groups[0].base_port",
            "base_port is only for single-host groups (set host)",
        )
    ]


def test_address_count_must_match_node_count():
    text = edit(BASE, "addresses: 10.0.1.[1-4]", "addresses: 10.0.1.[1-3]")
    assert problems(text) == [
        problem(text, "addresses: 10.0.1.[1-3]", "node_groups[0].addresses", "3 addresses for 4 nodes")
    ]


# -- GPUs ----------------------------------------------------------------------------------------


def test_nvml_with_device_files():
    text = edit(BASE, "      type: a100\n", "      type: a100\n      autodetect: nvml\n")
    assert problems(text) == [
        problem(
            text,
            "devices: /dev/nvidia[0-1]",
            "node_groups[0].gpus.devices",
            "autodetect: nvml finds the devices; listing them too makes slurmd fail",
        )
    ]


def test_nvml_with_fake_devices_on_a_single_host():
    text = edit(
        BASE,
        "      devices: /dev/fake[0-1]\n      fake: true\n",
        "      autodetect: nvml\n      fake: true\n",
    )
    assert problems(text) == [
        problem(
            text,
            "autodetect: nvml",
            "node_groups[1].gpus.autodetect",
            "single-host groups split one machine's GPUs: list devices instead",
        ),
        problem(
            text,
            "fake: true",
            "node_groups[1].gpus.fake",
            "fake devices cannot be autodetected by NVML; use autodetect: off",
        ),
    ]


def test_nvml_without_device_files_is_fine():
    text = edit(BASE, "      devices: /dev/nvidia[0-1]\n", "      autodetect: nvml\n")
    assert load(text).node("gpu1").gpu_devices == ()


def test_devices_are_required_without_nvml():
    text = edit(BASE, "      devices: /dev/nvidia[0-1]\n", "")
    gpus_line = line_of(text, "type: a100") - 2  # the `gpus:` key of the first group
    assert problems(text) == [
        f"{FILE}:{gpus_line}: node_groups[0].gpus.devices: list the device files (e.g. /dev/nvidia[0-7]) or set autodetect: nvml"
    ]


def test_device_count_multi_host():
    text = edit(BASE, "devices: /dev/nvidia[0-1]", "devices: /dev/nvidia[0-2]")
    assert problems(text) == [
        problem(
            text,
            "devices: /dev/nvidia[0-2]",
            "node_groups[0].gpus.devices",
            "3 device files but 2 GPUs (count)",
        )
    ]


def test_device_count_single_host():
    text = edit(BASE, "devices: /dev/fake[0-1]", "devices: /dev/fake0")
    assert problems(text) == [
        problem(
            text,
            "devices: /dev/fake0",
            "node_groups[1].gpus.devices",
            "1 device files but 2 GPUs (1 per node x 2 nodes)",
        )
    ]


def test_device_files_repeat():
    text = edit(BASE, "devices: /dev/nvidia[0-1]", "devices: /dev/nvidia[0,0]")
    assert problems(text) == [
        problem(text, "devices: /dev/nvidia[0,0]", "node_groups[0].gpus.devices", "device files repeat")
    ]


def test_device_files_must_be_absolute():
    text = edit(BASE, "devices: /dev/nvidia[0-1]", "devices: dev/nvidia[0-1]")
    assert problems(text) == [
        problem(
            text,
            "devices: dev/nvidia",
            "node_groups[0].gpus.devices",
            "device file 'dev/nvidia0' must be an absolute path",
        )
    ]


def test_one_device_for_two_nodes_of_one_host():
    # two single-host groups on the same host, both claiming /dev/fake0
    text = edit(
        BASE,
        "partitions:\n",
        "  - name: devb\n    nodes: devb1\n    host: box\n    base_port: 17010\n    cores_per_socket: 1\n"
        "    real_memory_mb: 100\n    gpus:\n      count: 1\n      devices: /dev/fake0\npartitions:\n",
    )
    text = edit(text, "nodes: [gpu, dev]", "nodes: [gpu, dev, devb]")
    assert problems(text) == [
        problem(text, "node_groups:", "node_groups", "device /dev/fake0 on host 'box' belongs to two nodes")
    ]


# -- ports ---------------------------------------------------------------------------------------


def test_slurmdbd_on_the_mariadb_port():
    text = edit(BASE, "  host: head\nlogin", "  host: head\n  port: 3306\nlogin")
    assert problems(text) == [
        problem(
            text,
            "port: 3306",
            "accounting.port",
            "port 3306 on host 'head' is used by both slurmdbd and MariaDB",
        )
    ]


def test_slurmctld_and_slurmdbd_on_one_port():
    text = edit(BASE, "  host: head\nlogin", "  host: head\n  port: 6817\nlogin")
    assert problems(text) == [
        problem(
            text,
            "port: 6817",
            "accounting.port",
            "port 6817 on host 'head' is used by both slurmctld and slurmdbd",
        )
    ]


def test_slurmctld_and_a_single_host_slurmd_on_one_port():
    text = edit(BASE, "  primary: head\n", "  primary: box\n  port: 17002\n")
    assert problems(text) == [
        problem(
            text,
            "base_port: 17001",
            "node_groups[1].base_port",
            "port 17002 on host 'box' is used by both slurmctld and slurmd of dev2",
        )
    ]


def test_controller_on_a_compute_node_with_the_slurmd_port():
    text = edit(BASE, "  primary: head\n", "  primary: gpu1\n  port: 6818\n")
    assert problems(text) == [
        problem(
            text,
            "  - name: gpu$",
            "node_groups[0]",
            "port 6818 on host 'gpu1' is used by both slurmctld and slurmd of gpu1",
        )
    ]


def test_two_single_host_groups_with_overlapping_ports():
    text = edit(
        BASE,
        "partitions:\n",
        "  - name: devb\n    nodes: devb1\n    host: box\n    base_port: 17002\n    cores_per_socket: 1\n"
        "    real_memory_mb: 100\npartitions:\n",
    )
    text = edit(text, "nodes: [gpu, dev]", "nodes: [gpu, dev, devb]")
    assert problems(text) == [
        problem(
            text,
            "base_port: 17002",
            "node_groups[2].base_port",
            "port 17002 on host 'box' is used by both slurmd of dev2 and slurmd of devb1",
        )
    ]


# -- partitions ----------------------------------------------------------------------------------


def test_only_one_default_partition():
    text = edit(
        BASE,
        "    default: true\n",
        "    default: true\n  - name: more\n    nodes: [gpu]\n    default: true\n",
    )
    assert problems(text) == [
        problem(text, "partitions:", "partitions", "only one partition can be the default, not all, more")
    ]


def test_partition_declared_twice():
    text = edit(BASE, "    default: true\n", "    default: true\n  - name: all\n    nodes: [gpu]\n")
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'nodes: [gpu]$') - 1}: partitions[1].name: partition 'all' is declared twice"
    ]


def test_partition_member_that_is_neither_group_nor_node():
    text = edit(BASE, "nodes: [gpu, dev]", "nodes: [gpu, dev, 'gpu[4-5]']")
    assert problems(text) == [
        problem(
            text, "nodes: [gpu, dev,", "partitions[0].nodes[2]", "'gpu5' is neither a node group nor a node"
        )
    ]


def test_partition_member_that_is_a_bad_hostlist():
    text = edit(BASE, "nodes: [gpu, dev]", "nodes: [gpu, dev, 'x[1-']")
    assert problems(text) == [
        problem(text, "nodes: [gpu, dev,", "partitions[0].nodes[2]", "unclosed '[' in 'x[1-'")
    ]


def test_partition_options_may_not_set_fields():
    text = edit(
        BASE, "    default: true\n", "    default: true\n    options:\n      MaxTime: 10\n      nodes: x\n"
    )
    assert problems(text) == [
        problem(text, "MaxTime: 10", "partitions[0].options.MaxTime", "set it with the field 'max_time'"),
        problem(text, "nodes: x", "partitions[0].options.nodes", "set it with the field 'nodes'"),
    ]


def test_nodes_in_no_partition():
    text = edit(BASE, "nodes: [gpu, dev]", "nodes: ['gpu[1-2]']")
    assert problems(text) == [
        problem(text, "partitions:", "partitions", "nodes in no partition: dev[1-2],gpu[3-4]")
    ]


def test_partition_members_are_groups_or_hostlists_without_repeats():
    text = edit(BASE, "nodes: [gpu, dev]", "nodes: [gpu, 'gpu[1-2],dev[1-2]', dev]")
    cluster = load(text)
    assert cluster.partition_nodes["all"] == ["gpu1", "gpu2", "gpu3", "gpu4", "dev1", "dev2"]


# -- topology ------------------------------------------------------------------------------------

TREE = """\
topology:
  plugin: tree
  switches:
    - name: leaf1
      nodes: gpu[1-4]
    - name: leaf2
      nodes: dev[1-2]
    - name: spine
      switches: leaf[1-2]
"""


def test_a_valid_tree():
    assert problems(BASE + TREE) == []


def test_tree_with_blocks():
    text = BASE + TREE + "  blocks:\n    - name: b1\n      nodes: gpu1\n"
    assert problems(text) == [problem(text, "blocks:", "topology.blocks", "blocks belong to plugin: block")]


def test_tree_without_switches():
    text = BASE + "topology:\n  plugin: tree\n"
    assert problems(text) == [
        problem(text, "topology:", "topology", "nodes on no switch/block: dev[1-2],gpu[1-4]"),
        problem(text, "topology:", "topology.switches", "a tree topology needs switches"),
    ]


def test_switch_declared_twice():
    text = BASE + edit(
        TREE,
        "    - name: leaf2\n      nodes: dev[1-2]\n",
        "    - name: leaf2\n      nodes: dev[1-2]\n    - name: leaf1\n      switches: leaf2\n",
    )
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'switches: leaf2$') - 1}: topology.switches[2].name: switch 'leaf1' is declared twice"
    ]


def test_switch_with_both_or_neither_nodes_and_switches():
    text = BASE + edit(TREE, "      switches: leaf[1-2]\n", "      switches: leaf[1-2]\n      nodes: gpu1\n")
    assert problems(text) == [
        problem(
            text,
            "name: spine",
            "topology.switches[2]",
            "a switch has either nodes (leaf) or switches (parent), not both or neither",
        )
    ]
    text = BASE + edit(TREE, "    - name: spine\n      switches: leaf[1-2]\n", "    - name: spine\n")
    assert problems(text) == [
        problem(
            text,
            "name: spine",
            "topology.switches[2]",
            "a switch has either nodes (leaf) or switches (parent), not both or neither",
        )
    ]


def test_child_switch_not_declared():
    text = BASE + edit(TREE, "switches: leaf[1-2]", "switches: leaf[1-3]")
    assert problems(text) == [
        problem(
            text, "switches: leaf[1-3]", "topology.switches[2].switches", "switch 'leaf3' is not declared"
        )
    ]


def test_switch_loop():
    text = BASE + edit(
        TREE,
        "      nodes: dev[1-2]\n",
        "      nodes: dev[1-2]\n    - name: loop1\n      switches: loop2\n    - name: loop2\n      switches: loop1\n",
    )
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'plugin: tree') + 1}: topology.switches: switch loop: loop1 -> loop2 -> loop1"
    ]


def test_switch_member_that_is_not_a_node():
    text = BASE + edit(TREE, "nodes: dev[1-2]", "nodes: dev[1-3]")
    assert problems(text) == [
        problem(text, "nodes: dev[1-3]", "topology.switches[1].nodes", "'dev3' is not a node")
    ]


def test_nodes_on_no_switch_and_on_two_switches():
    text = BASE + edit(TREE, "nodes: dev[1-2]", "nodes: gpu4")
    assert problems(text) == [
        problem(text, "topology:", "topology", "nodes on no switch/block: dev[1-2]"),
        problem(text, "topology:", "topology", "nodes on more than one switch/block: gpu4"),
    ]


BLOCK = """\
topology:
  plugin: block
  blocks:
    - name: b1
      nodes: gpu[1-4]
    - name: b2
      nodes: dev[1-2]
  block_sizes: [2, 4]
"""


def test_a_valid_block_topology():
    assert problems(BASE + BLOCK) == []


def test_block_with_switches():
    text = BASE + BLOCK + "  switches:\n    - name: s1\n      nodes: gpu1\n"
    assert problems(text) == [
        problem(text, "  switches:", "topology.switches", "switches belong to plugin: tree")
    ]


def test_block_without_blocks():
    text = BASE + "topology:\n  plugin: block\n"
    assert problems(text) == [
        problem(text, "topology:", "topology", "nodes on no switch/block: dev[1-2],gpu[1-4]"),
        problem(text, "topology:", "topology.blocks", "a block topology needs blocks"),
    ]


def test_block_member_that_is_not_a_node_and_nodes_in_two_blocks():
    text = BASE + edit(BLOCK, "nodes: dev[1-2]", "nodes: dev[1-2],zzz")
    assert problems(text) == [
        problem(text, "nodes: dev[1-2],zzz", "topology.blocks[1].nodes", "'zzz' is not a node")
    ]
    text = BASE + edit(BLOCK, "nodes: dev[1-2]", "nodes: dev[1-2],gpu1")
    assert problems(text) == [
        problem(text, "topology:", "topology", "nodes on more than one switch/block: gpu1")
    ]


# -- overrides -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("ClusterName", "cluster_name"),
        ("clustername", "cluster_name"),
        ("SlurmctldHost", "controllers.primary / controllers.backup"),
        ("SLURMUSER", "slurm.user"),
        ("NodeName", "node_groups"),
        ("TopologyPlugin", "topology.plugin"),
        ("AccountingStoragePort", "accounting.port"),
    ],
)
def test_slurm_conf_may_not_override_what_the_inventory_sets(key, field):
    text = BASE + f"slurm:\n  conf:\n    {key}: x\n"
    assert problems(text) == [
        problem(text, f"{key}: x", f"slurm.conf.{key}", f"set by the inventory: use {field}")
    ]


def test_cgroup_plugin_is_set_by_the_version():
    text = BASE + "cgroup:\n  overrides:\n    CgroupPlugin: cgroup/v1\n"
    assert problems(text) == [
        problem(
            text, "CgroupPlugin", "cgroup.overrides.CgroupPlugin", "set by the inventory: use cgroup.version"
        )
    ]


def test_keys_that_differ_only_in_case():
    text = (
        BASE
        + "slurm:\n  conf:\n    KillWait: 10\n    killwait: 20\ncgroup:\n  overrides:\n    ConstrainCores: no\n    constraincores: yes\n"
    )
    text = edit(
        text, "    default: true\n", "    default: true\n    options:\n      Hidden: yes\n      HIDDEN: no\n"
    )
    assert problems(text) == [
        problem(
            text,
            "HIDDEN: no",
            "partitions[0].options.HIDDEN",
            "the same key as 'Hidden': Slurm ignores case in keys",
        ),
        problem(
            text,
            "killwait: 20",
            "slurm.conf.killwait",
            "the same key as 'KillWait': Slurm ignores case in keys",
        ),
        problem(
            text,
            "constraincores: yes",
            "cgroup.overrides.constraincores",
            "the same key as 'ConstrainCores': Slurm ignores case in keys",
        ),
    ]


# -- building Slurm from source ----------------------------------------------------------------


def test_tarball_build_needs_url_and_checksum():
    text = BASE + "slurm:\n  install: build\n  build:\n    source: tarball\n"
    assert problems(text) == [
        problem(text, "  build:", "slurm.build.tarball_sha256", "source: tarball needs tarball_sha256"),
        problem(text, "  build:", "slurm.build.tarball_url", "source: tarball needs tarball_url"),
    ]


# -- everything at once --------------------------------------------------------------------------


def test_every_cross_check_problem_is_reported_together_in_line_order():
    text = edit(BASE, "  - name: box\n", "  - name: head\n  - name: box\n")
    text = edit(text, "login: [head]", "login: [head, nowhere]")
    text = edit(text, "addresses: 10.0.1.[1-4]", "addresses: 10.0.1.[1-3]")
    text = edit(text, "    base_port: 17001\n", "")
    text = edit(text, "nodes: [gpu, dev]", "nodes: [gpu, dev, ghost]")
    assert problems(text) == [
        f"{FILE}:{line_of(text, '  - name: box') - 1}: hosts[1].name: host 'head' is declared twice",
        problem(
            text, "login:", "login[1]", "host 'nowhere' is neither declared under hosts nor a compute node"
        ),
        problem(text, "addresses: 10.0.1.[1-3]", "node_groups[0].addresses", "3 addresses for 4 nodes"),
        problem(
            text,
            "  - name: dev",
            "node_groups[1].base_port",
            "single-host groups need base_port (one slurmd port per node)",
        ),
        problem(
            text,
            "nodes: [gpu, dev, ghost]",
            "partitions[0].nodes[2]",
            "'ghost' is neither a node group nor a node",
        ),
    ]
