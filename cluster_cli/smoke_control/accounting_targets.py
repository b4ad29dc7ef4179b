"""What the smoke suite's accounting checks use, from the inventory's accounts and QoS: a QoS
with a per-user GPU limit (the qos-limit check) and a QoS that another may preempt (the preempt
check's trigger), each with an account of the test user whose association may use it; and two
sibling accounts of the test user with different fair-share shares (the fairshare check)."""

from __future__ import annotations

from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.model import AssociationLimits, Qos, QosLimits, SlurmAccount

GPU_TRES = "gres/gpu"


def usable_qos(cluster: Cluster) -> dict[str, set[str]]:
    """Each account of the test user -> the QoS its association may use: the user's own list,
    else the nearest account's up the tree that sets one, else Slurm's inherited `normal`."""
    accounting = cluster.inventory.accounting
    if not accounting.enabled:
        return {}
    name = cluster.inventory.training.test_user
    user = next((entry for entry in accounting.users if entry.name == name), None)
    accounts = {account.name: account for account in accounting.accounts}
    charged = [(user.account if user and user.account else accounting.account), *(user.accounts if user else [])]
    return {account: set(user.qos) if user and user.qos else _inherited(account, accounts) for account in charged}


def _inherited(name: str, accounts: dict[str, SlurmAccount]) -> set[str]:
    seen: set[str] = set()
    while name in accounts and name not in seen:
        seen.add(name)
        if accounts[name].qos:
            return set(accounts[name].qos)
        name = accounts[name].parent
    return {"normal"}


def _account_for(usable: dict[str, set[str]], *qos: str) -> str | None:
    return next((account for account, allowed in usable.items() if set(qos) <= allowed), None)


def qos_limit(cluster: Cluster) -> dict[str, Any] | None:
    """{"qos", "account", "gpus", "deny"}: the first QoS that caps each user's GPUs (MaxTRESPerUser
    gres/gpu) and that the test user may use, and whether it has DenyOnLimit; None when there is none."""
    usable = usable_qos(cluster)
    for qos in cluster.inventory.accounting.qos:
        gpus = qos.limits.max_tres_per_user.get(GPU_TRES)
        account = _account_for(usable, qos.name)
        if gpus is not None and account:
            return {"qos": qos.name, "account": account, "gpus": int(gpus), "deny": "DenyOnLimit" in qos.flags}
    return None


def preemption(cluster: Cluster, gpus_per_job: int) -> dict[str, str] | None:
    """{"qos", "by", "account"}: a QoS whose jobs a job of QoS "by" may preempt (REQUEUE: the
    preempt check's job must be requeued), both usable by the test user in "account", and whose
    limits let a job of ``gpus_per_job`` GPUs run; None when there is none."""
    usable = usable_qos(cluster)
    defined = {qos.name: qos for qos in cluster.inventory.accounting.qos}
    accounts = {account.name: account for account in cluster.inventory.accounting.accounts}
    cluster_mode = cluster.inventory.priority.preemption.mode.lower()
    for by in cluster.inventory.accounting.qos:
        for name in by.preempt:
            victim = defined.get(name)
            account = _account_for(usable, by.name, name)
            if victim and account and _requeued(victim, cluster_mode) and _fits(victim.limits, gpus_per_job) \
                    and _fits(accounts[account].limits if account in accounts else None, gpus_per_job):
                return {"qos": name, "by": by.name, "account": account}
    return None


def _requeued(qos: Qos, cluster_mode: str) -> bool:
    mode = cluster_mode if qos.preempt_mode == "cluster" else qos.preempt_mode
    return mode == "requeue"


def _fits(limits: QosLimits | AssociationLimits | None, gpus: int) -> bool:
    """A job of ``gpus`` GPUs is within these limits (a QoS's or an account's own)."""
    if limits is None:
        return True
    caps = [limits.max_tres_per_job.get(GPU_TRES), limits.grp_tres.get(GPU_TRES)]
    if isinstance(limits, QosLimits):
        caps.append(limits.max_tres_per_user.get(GPU_TRES))
    return all(cap is None or cap >= gpus for cap in caps)


def fairshare(cluster: Cluster) -> dict[str, Any] | None:
    """{"accounts": [high, low], "shares": [s_high, s_low], "qos", "gpu_caps", "neutral"}: the
    first two sibling accounts the test user may charge whose fair-share ``shares`` differ (the
    larger first), a QoS usable in both (``normal`` where it can), each one's GPU cap (``GrpTRES
    gres/gpu`` of it or an account above it; None: none), so that the fairshare check knows how
    many one-node jobs it may run there at once, and another account of the user (None: none),
    which its job that holds a node is charged to; None when there are no such two accounts, or
    when the inventory asks for no fair share (priority.type basic)."""
    if cluster.inventory.priority.type != "multifactor":
        return None
    usable = usable_qos(cluster)
    accounts = {account.name: account for account in cluster.inventory.accounting.accounts}
    charged = [name for name in usable if name in accounts]
    for first_index, first in enumerate(charged):
        for second in charged[first_index + 1:]:
            one, other = accounts[first], accounts[second]
            common = usable[first] & usable[second]
            if one.parent != other.parent or one.shares == other.shares or not common:
                continue
            high, low = (one, other) if one.shares > other.shares else (other, one)
            neutral = next((name for name in usable if name not in (first, second)), None)
            return {"accounts": [high.name, low.name], "shares": [high.shares, low.shares],
                    "qos": "normal" if "normal" in common else min(common),
                    "gpu_caps": [_gpu_cap(high.name, accounts), _gpu_cap(low.name, accounts)],
                    "neutral": neutral}
    return None


def _gpu_cap(name: str, accounts: dict[str, SlurmAccount]) -> int | None:
    """The smallest GrpTRES gres/gpu of the account and those above it; None where none sets one."""
    caps: list[int] = []
    seen: set[str] = set()
    while name in accounts and name not in seen:
        seen.add(name)
        cap = accounts[name].limits.grp_tres.get(GPU_TRES)
        if cap is not None:
            caps.append(int(cap))
        name = accounts[name].parent
    return min(caps) if caps else None
