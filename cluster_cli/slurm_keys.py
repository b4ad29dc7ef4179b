"""Which Slurm config keys the inventory owns: the one home of that rule.

Each key below is rendered from the inventory field named beside it, so the free-form settings
(``slurm.conf``, ``cgroup.overrides``, partition ``options``) may not set it (resolve/overrides.py
refuses it, naming the field) and the renderers take it from that field. The renderers also
derive a few keys the inventory may still override: ``OVERRIDABLE_DERIVED_SLURM_KEYS``. Some keys
hold a comma-separated list of which the inventory owns single items (``OWNED_SLURM_LIST_ITEMS``): the
site's own items stay, the inventory adds its own (render/common.add_list_items), and a site may not
write an owned item itself.
tests/unit/test_slurm_keys.py holds the renderers to these tables.
"""

from __future__ import annotations

from collections.abc import Iterable

# slurm.conf keys the inventory sets from its own fields; overriding them would let the two disagree.
MANAGED_SLURM_KEYS = {
    "AccountingStorageHost": "accounting.host",
    "AccountingStoragePort": "accounting.port",
    "BackupController": "controllers.backup",
    "ClusterName": "cluster_name",
    "ControlMachine": "controllers.primary",
    "HealthCheckInterval": "health_check.interval_s",
    "HealthCheckNodeState": "health_check.node_state",
    # the program roles/slurmd installs; health_check.enabled: false leaves the three unset
    "HealthCheckProgram": "health_check.enabled",
    "MpiDefault": "mpi.plugin",
    "NodeName": "node_groups",
    "PartitionName": "partitions",
    "PreemptMode": "priority.preemption.mode",
    "PreemptType": "priority.preemption.enabled",
    "PriorityDecayHalfLife": "priority.decay_half_life",
    "PriorityMaxAge": "priority.max_age",
    "PriorityType": "priority.type",
    "PriorityWeightAge": "priority.weights.age",
    "PriorityWeightFairshare": "priority.weights.fairshare",
    "PriorityWeightJobSize": "priority.weights.job_size",
    "PriorityWeightPartition": "priority.weights.partition",
    "PriorityWeightQOS": "priority.weights.qos",
    "SlurmUser": "slurm.user",
    "SlurmctldHost": "controllers.primary / controllers.backup",
    "SlurmctldLogFile": "slurm.paths.log_dir",
    "SlurmctldPidFile": "slurm.paths.run_dir",
    "SlurmctldPort": "controllers.port",
    "SlurmdLogFile": "slurm.paths.log_dir",
    "SlurmdPidFile": "slurm.paths.run_dir",
    "SlurmdPort": "slurm.slurmd_port",
    "SlurmdSpoolDir": "slurm.paths.spool_dir",
    # the roles create these directories, so they must come from slurm.paths
    "StateSaveLocation": "slurm.paths.state_dir",
    "TopologyPlugin": "topology.plugin",
}
MANAGED_PARTITION_KEYS = {
    "Default": "default",
    "DefaultTime": "default_time",
    "MaxTime": "max_time",
    "Nodes": "nodes",
    "OverSubscribe": "oversubscribe",
    "PartitionName": "name",
    "QOS": "qos",
}
MANAGED_CGROUP_KEYS = {"CgroupPlugin": "cgroup.version"}
# cgroup.conf's CgroupPlugin of each `cgroup.version`.
CGROUP_PLUGINS = {"auto": "autodetect", "v1": "cgroup/v1", "v2": "cgroup/v2"}

# Derived from the inventory (accounting on) but a site's override wins: another storage type,
# other TRES to account (a license, ic/ofed), or what accounting enforces.
# DefMemPerCPU: the cluster's default memory of a job (render/mem_defaults.py).
OVERRIDABLE_DERIVED_SLURM_KEYS = {
    "AccountingStorageEnforce",
    "AccountingStorageType",
    "AccountingStorageTRES",
    "DefMemPerCPU",
    # MAX_TRES with priority.bill_gpus; a site may want other flags (render/priority.py)
    "PriorityFlags",
    # each node's spool directory where a host runs several slurmd and MPI is on (render/slurm_conf.py)
    "TmpFS",
}

# Slurm's default memory of a job that asks for none; slurm.conf(5): "DefMemPerCPU, DefMemPerGPU and
# DefMemPerNode are mutually exclusive". Derived per partition and for the cluster
# (render/mem_defaults.py); any one of them a site sets (null too) replaces the derived one.
DEFAULT_MEMORY_KEYS = ("DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode")

# slurm.conf keys whose value is a list of items, and the items of it the inventory sets from a
# field (compared without case, as Slurm looks them up): `SlurmctldParameters: idle_on_node_suspend`
# with `slurm.configless: true` renders `SlurmctldParameters=idle_on_node_suspend,enable_configless`.
OWNED_SLURM_LIST_ITEMS = {
    "SlurmctldParameters": {
        "enable_configless": "slurm.configless",
        "preempt_send_user_signal": "priority.preemption.send_user_signal",
    },
    "PreemptParameters": {"send_user_signal": "priority.preemption.send_user_signal"},
}


def find_key(names: Iterable[str], key: str) -> str | None:
    """The name among ``names`` that is ``key`` to Slurm, which reads keys without case
    (``killwait`` is ``KillWait``); None when there is none."""
    wanted = key.lower()
    return next((name for name in names if name.lower() == wanted), None)


def list_items(value: object) -> list[str]:
    """The items of a comma-separated Slurm list value (``a,b=1, c``), blanks dropped; none for null."""
    if value is None:
        return []
    return [item.strip() for item in str(value).split(",") if item.strip()]


def item_name(item: str) -> str:
    """An item's name without its value (``bf_max_job_test=100`` is ``bf_max_job_test``)."""
    return item.split("=", 1)[0].strip()
