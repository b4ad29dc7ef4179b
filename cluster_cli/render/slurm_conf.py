"""slurm.conf: expert defaults for GPU clusters, merged with the inventory's overrides."""

from __future__ import annotations

from typing import Any

from cluster_cli import hostlist
from cluster_cli.cluster import Cluster, SlurmNode
from cluster_cli.mpi_launch import mpi_enabled, mpi_plugin
from cluster_cli.render.common import add_list_items, format_value, header, key_value_lines, merge
from cluster_cli.render.health_conf import HEALTH_PROGRAM_PATH
from cluster_cli.render.mem_defaults import cluster_default, group_cpus, partition_defaults
from cluster_cli.render.priority import billing_weights, priority_list_items, priority_settings

# Choices the field notes record for GPU training clusters; each can be overridden or deleted
# (null) through `slurm.conf` in the inventory.
SLURM_CONF_DEFAULTS: dict[str, Any] = {
    "AuthType": "auth/munge",
    "GresTypes": "gpu",
    "InactiveLimit": 0,
    "JobAcctGatherFrequency": 30,
    "JobAcctGatherType": "jobacct_gather/cgroup",
    "JobCompType": "jobcomp/none",
    # One dead rank ends the whole step instead of leaving NCCL peers hanging.
    "KillOnBadExit": 1,
    "KillWait": 30,
    "MinJobAge": 300,
    # Users see their own jobs, usage and associations only (root, SlurmUser and operators all).
    "PrivateData": "accounts,jobs,usage,users",
    "PrologFlags": "Contain",
    # RDMA needs unlimited locked memory on the nodes, not the submit host's limit.
    "PropagateResourceLimitsExcept": "MEMLOCK",
    "ProctrackType": "proctrack/cgroup",
    # 1: a node that went DOWN only for not responding comes back when it registers again;
    # nodes an admin drained or that failed a check stay out until someone looks.
    "ReturnToService": 1,
    "SchedulerType": "sched/backfill",
    "SelectType": "select/cons_tres",
    "SelectTypeParameters": "CR_Core_Memory",
    "SlurmctldTimeout": 120,
    "SlurmdTimeout": 300,
    # srun listens on these ports only, so a firewall between login and compute hosts can allow them.
    "SrunPortRange": "60001-63000",
    "TaskPlugin": "task/affinity,task/cgroup",
    "Waittime": 0,
}


def _address(cluster: Cluster, host_name: str) -> str:
    host = cluster.hosts.get(host_name)
    return host.address if host else host_name


def _controller_host(cluster: Cluster, name: str) -> str:
    address = _address(cluster, name)
    return name if address == name else f"{name}({address})"


def global_settings(cluster: Cluster) -> dict[str, Any]:
    """Every key=value of slurm.conf outside the node and partition lines."""
    settings = merge(SLURM_CONF_DEFAULTS, derived_settings(cluster), cluster.inventory.slurm.conf)
    return add_list_items(settings, derived_list_items(cluster))


def derived_list_items(cluster: Cluster) -> dict[str, list[str]]:
    """Items of list-valued keys taken from inventory fields, added to what the overrides set
    (slurm_keys.OWNED_SLURM_LIST_ITEMS says which the inventory owns)."""
    items: dict[str, list[str]] = {}
    if cluster.inventory.slurm.configless:
        items["SlurmctldParameters"] = ["enable_configless"]
    for key, wanted in priority_list_items(cluster).items():
        items[key] = [*items.get(key, []), *wanted]
    return items


def derived_settings(cluster: Cluster) -> dict[str, Any]:
    """The keys taken from inventory fields (slurm_keys.py says which the inventory owns)."""
    inventory = cluster.inventory
    paths = inventory.slurm.paths
    derived: dict[str, Any] = {
        "SlurmUser": inventory.slurm.user,
        "SlurmctldPort": inventory.controllers.port,
        "SlurmdPort": inventory.slurm.slurmd_port,
        "StateSaveLocation": paths.state_dir,
        "SlurmdSpoolDir": f"{paths.spool_dir}/%n",
        "SlurmctldLogFile": f"{paths.log_dir}/slurmctld.log",
        "SlurmdLogFile": f"{paths.log_dir}/slurmd-%n.log",
        "SlurmctldPidFile": f"{paths.run_dir}/slurmctld.pid",
        "SlurmdPidFile": f"{paths.run_dir}/slurmd-%n.pid",
    }
    accounting = inventory.accounting
    if accounting.enabled and accounting.host:
        derived.update(
            {
                "AccountingStorageType": "accounting_storage/slurmdbd",
                "AccountingStorageHost": _address(cluster, accounting.host),
                "AccountingStoragePort": accounting.port,
                "AccountingStorageTRES": gpu_tres(cluster),
                # A job needs an association (a user added to an account, as deploy does for
                # accounting.users and the test user) and stays within its limits and QOS.
                "AccountingStorageEnforce": "associations,limits,qos",
            }
        )
    derived.update(cluster_default(cluster))
    if inventory.topology is not None:
        derived["TopologyPlugin"] = f"topology/{inventory.topology.plugin}"
    derived.update(health_check_settings(cluster))
    derived.update(priority_settings(cluster))
    derived.update(mpi_settings(cluster))
    return derived


def mpi_settings(cluster: Cluster) -> dict[str, Any]:
    """MpiDefault; and where one host runs several slurmd, each node's own TmpFS (its spool
    directory): the PMIx plugin makes each step's client directory in TmpFS, named by user, job and
    step only, so two nodes of one host in one step collide on it ("task launch failed")."""
    if not mpi_enabled(cluster.inventory):
        return {"MpiDefault": "none"}
    settings: dict[str, Any] = {"MpiDefault": mpi_plugin(cluster.inventory)}
    if any(len(host.slurmd_nodes) > 1 for host in cluster.hosts.values()):
        settings["TmpFS"] = f"{cluster.inventory.slurm.paths.spool_dir}/%n"
    return settings


def gpu_tres(cluster: Cluster) -> str:
    """``gres/gpu`` and ``gres/gpu:TYPE`` for each GPU type, so that sacct tells the types apart."""
    groups = cluster.inventory.node_groups
    kinds = sorted({group.gpus.type for group in groups if group.gpus and group.gpus.type})
    return ",".join(["gres/gpu", *(f"gres/gpu:{kind}" for kind in kinds)])


def health_check_settings(cluster: Cluster) -> dict[str, Any]:
    """cluster-cli's node health check (render/health_conf.py), when the inventory turns it on."""
    health = cluster.inventory.health_check
    if not health.enabled:
        return {}
    return {
        "HealthCheckProgram": HEALTH_PROGRAM_PATH,
        "HealthCheckInterval": health.interval_s,
        "HealthCheckNodeState": health.node_state,
    }


def _node_attributes(node: SlurmNode) -> list[tuple[str, str]]:
    group = node.group
    attributes: list[tuple[str, str]] = []
    if node.single_host:
        attributes.append(("NodeHostname", node.host))
    attributes.append(("CPUs", str(group_cpus(group))))
    attributes += [
        ("Sockets", str(group.sockets)),
        ("CoresPerSocket", str(group.cores_per_socket)),
        ("ThreadsPerCore", str(group.threads_per_core)),
        ("RealMemory", str(group.real_memory_mb)),
    ]
    if group.gpus is not None:
        kind = f"{group.gpus.type}:" if group.gpus.type else ""
        attributes.append(("Gres", f"gpu:{kind}{group.gpus.count}"))
    if group.features:
        attributes.append(("Feature", ",".join(group.features)))
    if group.weight is not None:
        attributes.append(("Weight", str(group.weight)))
    attributes.append(("State", "UNKNOWN"))
    return attributes


def _aligned(values: list[str]) -> str | None:
    """One value for all, or a hostlist that expands to ``values`` in order; else None.

    Slurm pairs NodeAddr and Port lists with NodeName position by position.
    """
    if len(set(values)) == 1:
        return values[0]
    text = hostlist.compress(values)
    return text if hostlist.expand(text) == values else None


def node_lines(cluster: Cluster) -> list[str]:
    """NodeName lines: one per group, hostlist-compressed, or one per node when the group's
    addresses or ports do not line up with its names."""
    lines: list[str] = []
    for group in cluster.inventory.node_groups:
        members = {node.name: node for node in cluster.group_nodes(group)}
        if not members:
            continue
        names = cluster.group_hostlist(group)
        ordered = [members[name] for name in hostlist.expand(names)]
        varying: list[tuple[str, list[str]]] = []
        if any(node.address != node.name for node in ordered):
            varying.append(("NodeAddr", [node.address for node in ordered]))
        if ordered[0].single_host:
            varying.append(("Port", [str(node.port) for node in ordered]))
        attributes = " ".join(f"{key}={value}" for key, value in _node_attributes(ordered[0]))
        compressed = [(key, _aligned(values)) for key, values in varying]
        if all(text is not None for _, text in compressed):
            fields = "".join(f" {key}={text}" for key, text in compressed)
            lines.append(f"NodeName={names}{fields} {attributes}")
            continue
        for position, node in enumerate(ordered):
            fields = "".join(f" {key}={values[position]}" for key, values in varying)
            lines.append(f"NodeName={node.name}{fields} {attributes}")
    return lines


def partition_lines(cluster: Cluster) -> list[str]:
    lines = []
    memory = partition_defaults(cluster)
    for partition in cluster.inventory.partitions:
        settings: list[tuple[str, Any]] = [
            ("Nodes", cluster.partition_hostlist(partition.name))
        ]
        if partition.default:
            settings.append(("Default", "YES"))
        settings.append(("MaxTime", partition.max_time))
        if partition.default_time:
            settings.append(("DefaultTime", partition.default_time))
        if partition.oversubscribe:
            settings.append(("OverSubscribe", partition.oversubscribe))
        if partition.qos:
            settings.append(("QOS", partition.qos))
        derived = {"State": "UP", **memory.get(partition.name, {})}
        derived.update(billing_weights(cluster, cluster.partitions[partition.name].groups))
        options = merge(derived, partition.options)
        settings += [(key, options[key]) for key in sorted(options, key=str.lower)]
        body = " ".join(f"{key}={format_value(value)}" for key, value in settings)
        lines.append(f"PartitionName={partition.name} {body}")
    return lines


def render_slurm_conf(cluster: Cluster) -> str:
    inventory = cluster.inventory
    controllers = [inventory.controllers.primary]
    if inventory.controllers.backup:
        controllers.append(inventory.controllers.backup)
    parts = [header(cluster.name, "slurm.conf"), f"ClusterName={cluster.name}"]
    parts += [f"SlurmctldHost={_controller_host(cluster, name)}" for name in controllers]
    parts += key_value_lines(global_settings(cluster))
    parts += ["", "# Nodes"] + node_lines(cluster)
    parts += ["", "# Partitions"] + partition_lines(cluster)
    return "\n".join(parts) + "\n"
