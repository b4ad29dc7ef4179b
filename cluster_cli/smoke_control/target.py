"""The smoke suite's target, derived from the inventory: which partition, GPUs and thresholds."""

from __future__ import annotations

import re
from pathlib import Path

from cluster_cli.cluster import Cluster
from cluster_cli.errors import ClusterCliError
from cluster_cli.smoke import SmokeTarget


def default_partition(cluster: Cluster) -> str:
    partitions = cluster.inventory.partitions
    return next((partition.name for partition in partitions if partition.default), partitions[0].name)


def _device_glob(devices: tuple[str, ...]) -> str:
    """``/dev/fake-gpu/nvidia0`` -> ``/dev/fake-gpu/nvidia[0-9]*``."""
    first = Path(devices[0])
    return str(first.parent / (re.sub(r"\d+$", "", first.name) + "[0-9]*"))


def smoke_target(cluster: Cluster, partition: str | None = None, check_timeout_s: float = 180.0) -> SmokeTarget:
    name = partition or default_partition(cluster)
    if name not in cluster.partition_nodes:
        raise ClusterCliError(f"no partition '{name}' (partitions: {', '.join(cluster.partition_nodes)})")
    nodes = [cluster.node(node) for node in cluster.partition_nodes[name]]
    groups = {id(node.group): node.group for node in nodes}.values()
    gpu_counts = [group.gpus.count if group.gpus else 0 for group in groups]
    gpu_types = {group.gpus.type for group in groups if group.gpus}
    fake = any(group.gpus is not None and group.gpus.fake for group in groups)
    gpu_type = next(iter(gpu_types)) if len(gpu_types) == 1 else None
    training = cluster.inventory.training
    thresholds: dict[str, float | None] = {}
    if gpu_type and gpu_type in training.thresholds:
        thresholds = {key: value for key, value in training.thresholds[gpu_type].model_dump().items() if value is not None}
    with_devices = [node for node in nodes if node.gpu_devices]
    return SmokeTarget(
        nodes=[node.name for node in nodes],
        work_dir=Path(training.work_dir),
        partition=name,
        gpus_per_node=min(gpu_counts),
        gpu_type=gpu_type.upper() if gpu_type else None,
        fake_gpus=fake,
        accounting_enabled=cluster.inventory.accounting.enabled,
        user=training.test_user,
        user_uid=training.test_user_uid,
        user_gid=training.test_user_gid,
        python=str(Path(training.venv_path) / "bin" / "python"),
        torch_installed=training.torch_version is not None,
        thresholds=thresholds,
        check_timeout_s=check_timeout_s,
        gpu_device_glob=_device_glob(with_devices[0].gpu_devices) if with_devices else SmokeTarget.gpu_device_glob,
    )
