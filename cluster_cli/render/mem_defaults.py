"""Default memory of a job that asks for none, so that one small job does not take a whole node.

Without a default, select/cons_tres with CR_Core_Memory gives a job that asks for no memory all of
its nodes' memory, and the next job waits for Resources. The defaults follow the node groups:

- a partition whose groups all have GPUs: ``DefMemPerGPU`` = the smallest RealMemory / GPUs per
  node of its groups;
- any other partition (CPU-only, or GPU and CPU-only groups mixed): ``DefMemPerCPU`` = the smallest
  RealMemory / CPUs of its groups. A GPU job there gets memory for the CPUs it is given;
- the cluster (a global ``DefMemPerCPU``): the smallest RealMemory / CPUs of all groups, for a job
  that asks for no GPU in a partition that has only ``DefMemPerGPU``.

The smallest ratio, so that the default fits on every node of the partition: every GPU (or CPU) of
a node can get a job with the default at once. slurm.conf(5): DefMemPerCPU, DefMemPerGPU and
DefMemPerNode are mutually exclusive; a partition without one of its own uses the cluster's
DefMemPerCPU. A job with GPUs and a per-GPU default is given the per-GPU memory alone
(select/cons_tres clears the per-CPU default of such a job). A site's own key of the three
(slurm_keys.DEFAULT_MEMORY_KEYS) replaces ours: in a partition's ``options`` for that partition,
in ``slurm.conf`` for the whole cluster (then no partition gets a derived one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cluster_cli.cluster import Cluster
from cluster_cli.model import NodeGroup
from cluster_cli.slurm_keys import DEFAULT_MEMORY_KEYS, find_key


def group_cpus(group: NodeGroup) -> int:
    """The CPUs Slurm schedules on a node of ``group`` (its CPUs= on the NodeName line)."""
    return group.cpus or group.sockets * group.cores_per_socket * group.threads_per_core


def sets_default_memory(settings: Mapping[str, object]) -> bool:
    """Whether ``settings`` (overrides) name any default-memory key, null included."""
    return any(find_key(settings, key) is not None for key in DEFAULT_MEMORY_KEYS)


def per_cpu(groups: Iterable[NodeGroup]) -> int:
    return min(group.real_memory_mb // group_cpus(group) for group in groups)


def partition_default(groups: list[NodeGroup]) -> dict[str, int]:
    """The default-memory key of a partition of ``groups``; none for a partition without nodes."""
    if not groups:
        return {}
    gpus = [group.gpus.count for group in groups if group.gpus]
    if len(gpus) == len(groups):
        return {"DefMemPerGPU": min(group.real_memory_mb // count for group, count in zip(groups, gpus))}
    return {"DefMemPerCPU": per_cpu(groups)}


def cluster_default(cluster: Cluster) -> dict[str, int]:
    """The global default, unless slurm.conf sets its own (or deletes ours with null)."""
    groups = [group for group in cluster.inventory.node_groups if cluster.group_nodes(group)]
    if not groups or sets_default_memory(cluster.inventory.slurm.conf):
        return {}
    return {"DefMemPerCPU": per_cpu(groups)}


def partition_defaults(cluster: Cluster) -> dict[str, dict[str, int]]:
    """Partition name -> its derived default-memory key, for each partition whose options and the
    cluster's slurm.conf set none."""
    if sets_default_memory(cluster.inventory.slurm.conf):
        return {}
    found: dict[str, dict[str, int]] = {}
    for partition in cluster.inventory.partitions:
        if sets_default_memory(partition.options):
            continue
        found[partition.name] = partition_default(cluster.partitions[partition.name].groups)
    return found
