"""The smoke suite's targets, derived from the inventory: which partitions and node groups, their
GPUs and thresholds. ``smoke_plan`` gives one target per partition and one per node group in it;
``smoke_target`` the single target of one partition (the library's plain use)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from cluster_cli.cluster import Cluster, SlurmNode
from cluster_cli.errors import ClusterCliError
from cluster_cli.model import NodeGroup
from cluster_cli.mpi_launch import installs_mpi4py, mpi_enabled, mpi_plugin
from cluster_cli.smoke import SmokeTarget
from cluster_cli.smoke_control import accounting_targets


def _device_glob(devices: tuple[str, ...]) -> str:
    """``/dev/fake-gpu/nvidia0`` -> ``/dev/fake-gpu/nvidia[0-9]*``."""
    first = Path(devices[0])
    return str(first.parent / (re.sub(r"\d+$", "", first.name) + "[0-9]*"))


def _cpus(group: NodeGroup) -> int:
    """The CPUs Slurm schedules on each node of ``group``."""
    return group.cpus or group.sockets * group.cores_per_socket * group.threads_per_core


def smoke_target(cluster: Cluster, partition: str | None = None, check_timeout_s: float = 180.0) -> SmokeTarget:
    name = partition or cluster.default_partition
    if name not in cluster.partition_nodes:
        raise ClusterCliError(f"no partition '{name}' (partitions: {', '.join(cluster.partition_nodes)})")
    nodes = [cluster.node(node) for node in cluster.partition_nodes[name]]
    groups = cluster.partitions[name].groups
    gpu_counts = [group.gpus.count if group.gpus else 0 for group in groups]
    gpu_types = {group.gpus.type for group in groups if group.gpus}
    fake = any(group.gpus is not None and group.gpus.fake for group in groups)
    gpu_type = next(iter(gpu_types)) if len(gpu_types) == 1 else None
    training = cluster.inventory.training
    thresholds = _type_thresholds(cluster, gpu_type)
    with_devices = [node for node in nodes if node.gpu_devices]
    return SmokeTarget(
        nodes=[node.name for node in nodes],
        work_dir=Path(training.work_dir),
        partition=name,
        gpus_per_node=min(gpu_counts),
        gpu_type=gpu_type.upper() if gpu_type else None,
        fake_gpus=fake,
        accounting_enabled=cluster.inventory.accounting.enabled,
        qos_limit=accounting_targets.qos_limit(cluster),
        fairshare=accounting_targets.fairshare(cluster),
        cpus_per_node=min(_cpus(group) for group in groups),
        mpi_plugin=mpi_plugin(cluster.inventory) if mpi_enabled(cluster.inventory) else None,
        mpi4py=installs_mpi4py(cluster.inventory),
        containers=cluster.inventory.containers.enabled,
        container_image=cluster.inventory.containers.image,
        user=training.test_user,
        user_uid=training.test_user_uid,
        user_gid=training.test_user_gid,
        python=str(Path(training.venv_path) / "bin" / "python"),
        torch_installed=training.torch_version is not None,
        thresholds=thresholds,
        check_timeout_s=check_timeout_s,
        gpu_device_glob=_device_glob(with_devices[0].gpu_devices) if with_devices else SmokeTarget.gpu_device_glob,
    )


def partitions_to_test(cluster: Cluster, partition: str | None) -> list[str]:
    """``partition``; every partition for None or "all" (unless one is named "all")."""
    if partition is None or (partition == "all" and partition not in cluster.partition_nodes):
        return list(cluster.partition_nodes)
    if partition not in cluster.partition_nodes:
        raise ClusterCliError(f"no partition '{partition}' (partitions: {', '.join(cluster.partition_nodes)})")
    return [partition]


def smoke_plan(
    cluster: Cluster, partition: str | None = None, sample: int | None = 2, check_timeout_s: float = 180.0
) -> list[SmokeTarget]:
    """The targets of a run: for each partition tested, one for its cluster checks over all its
    nodes, then one per node group in it (groups in inventory order) for the per-group checks on
    at most ``sample`` of that group's nodes there."""
    targets: list[SmokeTarget] = []
    for name in partitions_to_test(cluster, partition):
        base = dataclasses.replace(smoke_target(cluster, name, check_timeout_s), scope="partition")
        targets.append(base)
        members = set(cluster.partition_nodes[name])
        for group in cluster.inventory.node_groups:
            nodes = [node for node in cluster.group_nodes(group) if node.name in members]
            if nodes:
                targets.append(group_target(cluster, base, group, nodes, sample))
    return targets


def group_target(
    cluster: Cluster, partition: SmokeTarget, group: NodeGroup, nodes: list[SlurmNode], sample: int | None
) -> SmokeTarget:
    """The per-group checks' target: ``group``'s ``nodes`` in ``partition``, its GPUs and thresholds;
    its jobs exclude the partition's other nodes."""
    names = [node.name for node in nodes]
    members = set(names)  # a partition's every node is looked up: not in a list (10,000 x 10,000)
    gpus = group.gpus
    # the preempt job's GPUs: every GPU of each node it runs on (--exclusive holds fake ones too)
    job_gpus = gpus.count * min(len(names), sample or len(names)) if gpus else 0
    gpu_type = gpus.type if gpus else None
    with_devices = [node for node in nodes if node.gpu_devices]
    return dataclasses.replace(
        partition,
        scope="group",
        group=group.name,
        nodes=names,
        sample=sample,
        exclude_nodes=[node for node in partition.nodes if node not in members],
        gpus_per_node=gpus.count if gpus else 0,
        gpu_type=gpu_type.upper() if gpu_type else None,
        gres_type=gpu_type,
        fake_gpus=bool(gpus and gpus.fake),
        thresholds=_type_thresholds(cluster, gpu_type),
        cpus_per_node=_cpus(group),
        node_devices={node.name: list(node.gpu_devices) for node in with_devices},
        preemption=accounting_targets.preemption(cluster, job_gpus),
        gpu_device_glob=(
            _device_glob(with_devices[0].gpu_devices) if with_devices else SmokeTarget.gpu_device_glob
        ),
    )


def _type_thresholds(cluster: Cluster, gpu_type: str | None) -> dict[str, float | None]:
    """``training.thresholds[TYPE]``, the keys set there."""
    configured = cluster.inventory.training.thresholds
    if not gpu_type or gpu_type not in configured:
        return {}
    return {key: value for key, value in configured[gpu_type].model_dump().items() if value is not None}
