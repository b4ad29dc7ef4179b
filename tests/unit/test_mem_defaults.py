"""slurm.conf's default memory of a job (render/mem_defaults.py) and the per-type GPU TRES: one
small job must leave room for the next on the same node, and a site's own key replaces ours."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, SHIPPED_INVENTORIES, edit, load

from cluster_cli.loader import load_cluster
from cluster_cli.render.mem_defaults import group_cpus
from cluster_cli.render.slurm_conf import partition_lines, render_slurm_conf
from cluster_cli.slurm_keys import DEFAULT_MEMORY_KEYS

MEMORY_KEYS = tuple(key.lower() for key in DEFAULT_MEMORY_KEYS)
CPU_GROUP = """\
  - name: cpu
    nodes: cpu[1-2]
    addresses: 10.0.2.[1-2]
    cores_per_socket: 4
    real_memory_mb: 6000
"""


def memory_keys(line: str) -> dict[str, int]:
    """The default-memory keys of one slurm.conf line (a partition line or a global key)."""
    pairs = (pair.split("=", 1) for pair in line.split() if "=" in pair)
    return {key: int(value) for key, value in pairs if key.lower() in MEMORY_KEYS}


def global_memory(cluster) -> dict[str, int]:
    lines = render_slurm_conf(cluster).split("\n# Nodes")[0].splitlines()
    return {key: value for line in lines for key, value in memory_keys(line).items()}


def partition_memory(cluster) -> dict[str, dict[str, int]]:
    return {line.split()[0].split("=")[1]: memory_keys(line) for line in partition_lines(cluster)}


def with_partitions(partitions: str, groups: str = "") -> str:
    text = edit(BASE, "partitions:\n", groups + "partitions:\n")
    return text.split("partitions:\n")[0] + "partitions:\n" + partitions


def test_the_shipped_single_host_clusters_get_the_numbers_of_the_rule():
    local = load_cluster(SHIPPED_INVENTORIES["local"])  # 2 CPUs, 3072 MB, 1 GPU per node
    assert partition_memory(local) == {"debug": {"DefMemPerGPU": 3072}}
    assert global_memory(local) == {"DefMemPerCPU": 1536}
    # h100: 2 GPUs, 3072 MB; l4: 1 GPU, 2048 MB; cpu: 2 CPUs, 2048 MB (every group 2 CPUs)
    hetero = load_cluster(SHIPPED_INVENTORIES["hetero-local"])
    assert partition_memory(hetero) == {
        "gpu": {"DefMemPerGPU": 1536},
        "h100": {"DefMemPerGPU": 1536},
        "cpu": {"DefMemPerCPU": 1024},
    }
    assert global_memory(hetero) == {"DefMemPerCPU": 1024}


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_two_small_jobs_fit_on_one_node_of_every_partition(name):
    """The protection: without the defaults a job gets its node's whole memory and these fail."""
    cluster = load_cluster(SHIPPED_INVENTORIES[name])
    per_cpu = global_memory(cluster)["DefMemPerCPU"]
    group_of = {node.name: node.group for node in cluster.nodes}
    for partition, keys in partition_memory(cluster).items():
        assert len(keys) == 1, f"{partition}: {keys}"
        for group in {id(group_of[n]): group_of[n] for n in cluster.partition_nodes[partition]}.values():
            assert group_cpus(group) * keys.get("DefMemPerCPU", per_cpu) <= group.real_memory_mb
            if "DefMemPerGPU" in keys:
                assert group.gpus is not None
                assert group.gpus.count * keys["DefMemPerGPU"] <= group.real_memory_mb
            per_job = keys.get("DefMemPerGPU", per_cpu) if group.gpus and group.gpus.count > 1 else per_cpu
            two_jobs = 2 * per_job
            assert two_jobs <= group.real_memory_mb, f"{partition}/{group.name}: two 1-GPU or 1-CPU jobs"


def test_a_gpu_partition_takes_the_smallest_memory_per_gpu_of_its_groups():
    # gpu: 64000 MB / 2 GPUs = 32000; dev: 1000 MB / 1 GPU = 1000
    text = with_partitions(
        "  - name: all\n    nodes: [gpu, dev]\n    default: true\n  - name: big\n    nodes: [gpu]\n"
    )
    assert partition_memory(load(text)) == {"all": {"DefMemPerGPU": 1000}, "big": {"DefMemPerGPU": 32000}}


def test_a_cpu_only_partition_and_a_mixed_one_get_memory_per_cpu():
    # gpu: 64000 MB / 16 CPUs = 4000; cpu: 6000 MB / 4 CPUs = 1500; dev: 1000 / 2 = 500
    text = with_partitions(
        "  - name: mixed\n    nodes: [gpu, cpu]\n    default: true\n  - name: cpu\n    nodes: [cpu]\n"
        "  - name: dev\n    nodes: [dev]\n",
        CPU_GROUP,
    )
    cluster = load(text)
    assert partition_memory(cluster) == {
        "mixed": {"DefMemPerCPU": 1500},
        "cpu": {"DefMemPerCPU": 1500},
        "dev": {"DefMemPerGPU": 1000},
    }
    assert global_memory(cluster) == {"DefMemPerCPU": 500}


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("DefMemPerCPU: 500", {"DefMemPerCPU": 500}),
        ("defmempergpu: 700", {"defmempergpu": 700}),
        ("DefMemPerNode: 900", {"DefMemPerNode": 900}),
        ("DefMemPerGPU: null", {}),
    ],
)
def test_a_partition_option_replaces_the_derived_default(option, expected):
    text = edit(BASE, "    default: true\n", f"    default: true\n    options: {{{option}}}\n")
    cluster = load(text)
    assert partition_memory(cluster) == {"all": expected}
    assert global_memory(cluster) == {"DefMemPerCPU": 500}  # the cluster's stays


@pytest.mark.parametrize(
    ("setting", "expected"),
    [("DefMemPerCPU: 100", {"DefMemPerCPU": 100}), ("DefMemPerNode: 4000", {"DefMemPerNode": 4000}),
     ("defmempercpu: null", {})],
)
def test_a_slurm_conf_default_replaces_every_derived_one(setting, expected):
    cluster = load(BASE + f"slurm:\n  conf:\n    {setting}\n")
    assert global_memory(cluster) == expected
    assert partition_memory(cluster) == {"all": {}}


def test_gpu_tres_names_every_type_once_sorted():
    text = edit(BASE, "      count: 1\n", "      count: 1\n      type: l4\n")
    gpus = "    gpus: {count: 1, type: a100, devices: /dev/nvidia0}\n"
    more = CPU_GROUP.replace("10.0.2.", "10.0.3.").replace("cpu", "xa") + gpus
    text = edit(text, "    nodes: [gpu, dev]\n", "    nodes: [gpu, dev, xa]\n")
    text = edit(text, "partitions:\n", more + "partitions:\n")
    lines = render_slurm_conf(load(text)).splitlines()
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:l4" in lines


def test_gpu_tres_without_types_is_gres_gpu_and_a_site_value_wins():
    untyped = edit(BASE, "      type: a100\n", "")
    assert "AccountingStorageTRES=gres/gpu" in render_slurm_conf(load(untyped)).splitlines()
    site = BASE + "slurm:\n  conf:\n    AccountingStorageTRES: gres/gpu,license/iop1\n"
    lines = render_slurm_conf(load(site)).splitlines()
    assert [line for line in lines if line.startswith("AccountingStorageTRES=")] == [
        "AccountingStorageTRES=gres/gpu,license/iop1"
    ]


def test_no_gpu_tres_without_accounting():
    text = edit(BASE, "accounting:\n  host: head\n", "accounting:\n  enabled: false\n")
    assert "AccountingStorageTRES" not in render_slurm_conf(load(text))
