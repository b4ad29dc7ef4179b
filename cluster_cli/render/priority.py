"""slurm.conf's job priority and preemption, from the inventory's `priority` section: the
Priority* and Preempt* keys, the signal choice, and each GPU partition's TRESBillingWeights.

Why these defaults (docs/operations.md#teams-accounts-fair-share-and-preemption): fair share decides first, so
that an account below its share runs next; a QoS's priority next; waiting time and the partition
break ties. Preemption goes by QoS (a QoS names the ones it may preempt), a preempted job is put
back in the queue (REQUEUE) after a grace time in which it gets a signal to checkpoint. A GPU
partition bills GPUs, so fair share counts GPU hours, not CPUs.
"""

from __future__ import annotations

from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.model import NodeGroup
from cluster_cli.render.mem_defaults import group_cpus

# Where the signal choice lives in each series: Slurm 22.05 documents it as an item of
# SlurmctldParameters (slurm.conf(5) "preempt_send_user_signal"); later series as an item of
# PreemptParameters (a key 22.05's slurm.conf(5) does not have, see slurm_facts' known keys).
SIGNAL_ITEM_22_05 = ("SlurmctldParameters", "preempt_send_user_signal")
SIGNAL_ITEM_LATER = ("PreemptParameters", "send_user_signal")


def priority_settings(cluster: Cluster) -> dict[str, Any]:
    """The Priority* and Preempt* keys of slurm.conf (slurm_keys.MANAGED_SLURM_KEYS owns them)."""
    priority = cluster.inventory.priority
    settings: dict[str, Any] = {"PriorityType": f"priority/{priority.type}"}
    if priority.type == "multifactor":
        weights = priority.weights
        settings.update(
            {
                "PriorityDecayHalfLife": priority.decay_half_life,
                "PriorityMaxAge": priority.max_age,
                "PriorityWeightAge": weights.age,
                "PriorityWeightFairshare": weights.fairshare,
                "PriorityWeightJobSize": weights.job_size,
                "PriorityWeightPartition": weights.partition,
                "PriorityWeightQOS": weights.qos,
            }
        )
        if bills_gpus(cluster) and any(group.gpus for group in cluster.inventory.node_groups):
            # a job is billed for the larger of its weighted CPUs and GPUs (slurm.conf(5) MAX_TRES)
            settings["PriorityFlags"] = "MAX_TRES"
    if preempts(cluster):
        settings["PreemptType"] = "preempt/qos"
        settings["PreemptMode"] = priority.preemption.mode.upper()
    else:
        settings["PreemptType"] = "preempt/none"
    return settings


def preempts(cluster: Cluster) -> bool:
    """preempt/qos needs the QoS in slurmdbd: on with accounting only."""
    inventory = cluster.inventory
    return inventory.priority.preemption.enabled and inventory.accounting.enabled and inventory.accounting.host is not None


def signal_item(version: str | None) -> tuple[str, str]:
    """The list key and item that make Slurm send the job's own signal at preemption, for the
    series ``version`` pins (unpinned: Debian 12's 22.05)."""
    if version is None:
        return SIGNAL_ITEM_22_05
    from cluster_cli.slurm_facts import UnknownSlurmVersion, known_keys

    try:
        keys = known_keys(version, "slurm.conf")
    except UnknownSlurmVersion:
        return SIGNAL_ITEM_22_05
    return SIGNAL_ITEM_LATER if "PreemptParameters" in keys else SIGNAL_ITEM_22_05


def priority_list_items(cluster: Cluster) -> dict[str, list[str]]:
    if not (preempts(cluster) and cluster.inventory.priority.preemption.send_user_signal):
        return {}
    key, item = signal_item(cluster.inventory.slurm.version)
    return {key: [item]}


def bills_gpus(cluster: Cluster) -> bool:
    """GPUs are billed only where slurmdbd tracks them: without accounting, gres/gpu is no
    configured TRES (AccountingStorageTRES) and slurmctld stops at a weight naming it ("TRES
    weight 'GRES:gpu' is not a configured TRES type"), and there is no fair share to bill for."""
    return cluster.inventory.priority.bill_gpus and cluster.inventory.accounting.enabled


def billing_weights(cluster: Cluster, groups: list[NodeGroup]) -> dict[str, str]:
    """A partition's TRESBillingWeights: GRES/gpu=1 and CPU such that a node's CPUs cost as much as
    its GPUs (the group with the most GPUs per CPU sets it); none for a CPU-only partition."""
    gpu_groups = [group for group in groups if group.gpus is not None]
    if not (bills_gpus(cluster) and cluster.inventory.priority.type == "multifactor" and gpu_groups):
        return {}
    cpu_weight = max(group.gpus.count / group_cpus(group) for group in gpu_groups if group.gpus)
    return {"TRESBillingWeights": f"CPU={cpu_weight:.4g},GRES/gpu=1"}
