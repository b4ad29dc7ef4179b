"""The accounts, users' associations and QoS the inventory asks slurmdbd for: one document, the
role variable ``slurmdbd_accounting`` that plugins/modules/slurm_associations.py applies with sacctmgr
(and compares with what ``sacctmgr show`` reads; it normalises both sides the same way).

Accounts come parents first; the account of the users that name none (``accounting.account``)
is added below root where ``accounting.accounts`` does not define it, and the smoke test user gets
an association there (slurm.conf enforces associations: a user without one cannot submit).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.model import AssociationLimits, Qos, SlurmAccount, SlurmUser
from cluster_cli.resolve.accounting import ROOT_ACCOUNT


def accounting_document(cluster: Cluster) -> dict[str, Any]:
    """{cluster, qos, accounts, users}: each entry in sacctmgr's field names (see the module)."""
    inventory = cluster.inventory
    accounting = inventory.accounting
    if not (accounting.enabled and accounting.host):
        return {"cluster": cluster.name, "qos": [], "accounts": [], "users": []}
    grace = inventory.priority.preemption.grace_time_s
    accounts = list(accounting.accounts)
    if accounting.account not in {account.name for account in accounts}:
        accounts.insert(0, SlurmAccount(name=accounting.account))
    users = list(accounting.users)
    if inventory.training.test_user not in {user.name for user in users}:
        users.append(SlurmUser(name=inventory.training.test_user))
    return {
        "cluster": cluster.name,
        "qos": [_qos(qos, grace) for qos in accounting.qos],
        "accounts": [account_entry(account) for account in parents_first(accounts)],
        "users": [user_entry(user, accounting.account) for user in users],
    }


# The inventory is the whole truth of the cluster's accounting data: what it no longer has is
# removed (the role's slurmdbd_accounting_remove), and `plan` shows each removal.
REMOVE_UNLISTED = True


def document_checksum(document: dict[str, Any]) -> str:
    """The accounting document's sha256, as the deploy record keeps it (plan's drift rule)."""
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def parents_first(accounts: list[SlurmAccount]) -> list[SlurmAccount]:
    """The accounts in an order where each comes after its parent (the inventory's order otherwise)."""
    placed: set[str] = {ROOT_ACCOUNT}
    ordered: list[SlurmAccount] = []
    remaining = list(accounts)
    while remaining:
        ready = [account for account in remaining if account.parent in placed or account.parent not in
                 {other.name for other in remaining}]
        if not ready:  # a cycle: validation refuses it before any render
            ready = remaining
        for account in ready:
            ordered.append(account)
            placed.add(account.name)
        remaining = [account for account in remaining if account not in ready]
    return ordered


def _qos(qos: Qos, grace_time_s: int) -> dict[str, Any]:
    limits = qos.limits
    return {
        "name": qos.name,
        "Description": qos.description or qos.name,
        "Priority": qos.priority,
        "Preempt": sorted(qos.preempt),
        "PreemptMode": qos.preempt_mode,
        "GraceTime": qos.grace_time_s if qos.grace_time_s is not None else grace_time_s,
        "UsageFactor": qos.usage_factor if qos.usage_factor is not None else 1.0,
        "Flags": sorted(qos.flags),
        "MaxTRESPU": dict(limits.max_tres_per_user),
        "MaxTRES": dict(limits.max_tres_per_job),
        "GrpTRES": dict(limits.grp_tres),
        "MaxJobsPU": limits.max_jobs_per_user,
        "MaxSubmitPU": limits.max_submit_jobs_per_user,
        "MaxWall": limits.max_wall,
    }


def _limits(limits: AssociationLimits) -> dict[str, Any]:
    return {
        "GrpTRES": dict(limits.grp_tres),
        "MaxTRES": dict(limits.max_tres_per_job),
        "GrpJobs": limits.grp_jobs,
        "MaxJobs": limits.max_jobs,
        "MaxSubmit": limits.max_submit_jobs,
        "MaxWall": limits.max_wall,
    }


def account_entry(account: SlurmAccount) -> dict[str, Any]:
    return {
        "name": account.name,
        "parent": account.parent,
        "Description": account.description or account.name,
        # sacctmgr's own default: the parent, or the account itself below root
        "Organization": account.organization or (account.parent if account.parent != ROOT_ACCOUNT else account.name),
        "Fairshare": account.shares,
        "DefaultQOS": account.default_qos,
        "QOS": sorted(account.qos),
        **_limits(account.limits),
    }


def user_entry(user: SlurmUser, default_account: str) -> dict[str, Any]:
    account = user.account or default_account
    return {
        "name": user.name,
        "DefaultAccount": account,
        "accounts": [account, *(name for name in user.accounts if name != account)],
        "Fairshare": user.shares,
        "DefaultQOS": user.default_qos,
        "QOS": sorted(user.qos),
        **_limits(user.limits),
    }
