"""Slurm's accounting data (accounts as a tree, users' associations, QoS): every name each of
them refers to defined, no cycle, no id twice, only the TRES this cluster tracks in a limit.

The per-field checks (name patterns, shares >= 1, a uid of at least 1000) are the model's; these
need the whole inventory. Each problem is reported at the field that names the undefined thing.
"""

from __future__ import annotations

from cluster_cli.errors import Location
from cluster_cli.model import AssociationLimits, Inventory, QosLimits
from cluster_cli.resolve.people import daemon_ids
from cluster_cli.resolve.problems import Problems
from cluster_cli.slurm_keys import find_key, list_items

ROOT_ACCOUNT = "root"
# Slurm's own QoS, made with the database; always there, never removed.
SLURM_DEFAULT_QOS = "normal"
# TRES every cluster tracks (slurm.conf(5) AccountingStorageTRES: "Billing, CPU, Energy, Memory,
# Node, FS/Disk, Pages and VMem are tracked by default").
DEFAULT_TRES = frozenset({"billing", "cpu", "energy", "mem", "node", "fs/disk", "pages", "vmem"})


def tracked_tres(inventory: Inventory) -> frozenset[str]:
    """The TRES names a limit may use: Slurm's default ones, gres/gpu and gres/gpu:TYPE of every
    GPU type here, and whatever a site's own AccountingStorageTRES adds (lower case)."""
    names = set(DEFAULT_TRES) | {"gres/gpu"}
    names |= {f"gres/gpu:{group.gpus.type}" for group in inventory.node_groups if group.gpus and group.gpus.type}
    key = find_key(inventory.slurm.conf, "AccountingStorageTRES")
    if key is not None:
        names |= {item.lower() for item in list_items(inventory.slurm.conf[key])}
    return frozenset(names)


def check_accounting(inventory: Inventory, problems: Problems) -> None:
    accounting = inventory.accounting
    where: Location = ("accounting",)
    if not accounting.enabled:
        for field in ("accounts", "qos"):
            if getattr(accounting, field):
                problems.add(where + (field,), "needs accounting (slurmdbd): `accounting.enabled` is false")
        return
    qos_names = _unique(problems, where + ("qos",), [qos.name for qos in accounting.qos], "QoS")
    account_names = _unique(problems, where + ("accounts",), [account.name for account in accounting.accounts], "account")
    _unique(problems, where + ("users",), [user.name for user in accounting.users], "user")
    known_qos = qos_names | {SLURM_DEFAULT_QOS}
    known_accounts = account_names | {accounting.account}
    tres = tracked_tres(inventory)
    for index, qos in enumerate(accounting.qos):
        at = where + ("qos", index)
        for position, name in enumerate(qos.preempt):
            if name == qos.name:
                problems.add(at + ("preempt", position), f"QoS {qos.name!r} cannot preempt itself")
            elif name not in known_qos:
                problems.add(at + ("preempt", position), _undefined("QoS", name, "accounting.qos"))
        _check_tres(problems, at + ("limits",), qos.limits, tres)
    for index, account in enumerate(accounting.accounts):
        at = where + ("accounts", index)
        if account.name == ROOT_ACCOUNT:
            problems.add(at + ("name",), "`root` is Slurm's own account, the root of the tree: give accounts below it")
        if account.parent not in known_accounts | {ROOT_ACCOUNT}:
            problems.add(at + ("parent",), _undefined("account", account.parent, "accounting.accounts"))
        _check_qos_choice(problems, at, account.qos, account.default_qos, known_qos)
        _check_tres(problems, at + ("limits",), account.limits, tres)
    _check_cycles(inventory, problems)
    for index, user in enumerate(accounting.users):
        at = where + ("users", index)
        if user.account is not None and user.account not in known_accounts:
            problems.add(at + ("account",), _undefined("account", user.account, "accounting.accounts"))
        for position, name in enumerate(user.accounts):
            if name not in known_accounts:
                problems.add(at + ("accounts", position), _undefined("account", name, "accounting.accounts"))
        _check_qos_choice(problems, at, user.qos, user.default_qos, known_qos)
        _check_tres(problems, at + ("limits",), user.limits, tres)
    _check_uids(inventory, problems)
    if accounting.qos:
        for index, partition in enumerate(inventory.partitions):
            if partition.qos is not None and partition.qos not in known_qos:
                problems.add(("partitions", index, "qos"), _undefined("QoS", partition.qos, "accounting.qos"))


def _undefined(kind: str, name: str, field: str) -> str:
    return f"{kind} {name!r} is not defined in {field}"


def _unique(problems: Problems, where: Location, names: list[str], kind: str) -> set[str]:
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            problems.add(where + (index, "name"), f"{kind} {name!r} is defined twice")
        seen.add(name)
    return seen


def _check_qos_choice(
    problems: Problems, at: Location, allowed: list[str], default: str | None, known: set[str]
) -> None:
    for position, name in enumerate(allowed):
        if name not in known:
            problems.add(at + ("qos", position), _undefined("QoS", name, "accounting.qos"))
    if default is None:
        return
    if default not in known:
        problems.add(at + ("default_qos",), _undefined("QoS", default, "accounting.qos"))
    elif allowed and default not in allowed:
        problems.add(at + ("default_qos",), f"QoS {default!r} is not one of its `qos` ({', '.join(allowed)})")


def _check_tres(problems: Problems, at: Location, limits: AssociationLimits | QosLimits, tres: frozenset[str]) -> None:
    for field in ("grp_tres", "max_tres_per_job", "max_tres_per_user"):
        for name in getattr(limits, field, {}):
            if name not in tres:
                problems.add(
                    at + (field, name),
                    f"TRES {name!r} is not tracked by this cluster (known: {', '.join(sorted(tres))})",
                )


def _check_cycles(inventory: Inventory, problems: Problems) -> None:
    """An account whose parents lead back to itself, named once per cycle at its `parent`."""
    accounts = inventory.accounting.accounts
    parent = {account.name: account.parent for account in accounts}
    index_of = {account.name: index for index, account in reversed(list(enumerate(accounts)))}
    reported: set[str] = set()
    for account in accounts:
        path: list[str] = []
        name = account.name
        while name in parent and name not in path:
            path.append(name)
            name = parent[name]
        if name in path and not reported & set(path[path.index(name):]):
            cycle = path[path.index(name):]
            reported |= set(cycle)
            problems.add(
                ("accounting", "accounts", index_of[cycle[0]], "parent"),
                "accounts form a cycle: " + " -> ".join([*cycle, cycle[0]]) + " (each account's parent)",
            )


def _check_uids(inventory: Inventory, problems: Problems) -> None:
    taken, _ = daemon_ids(inventory)
    for index, user in enumerate(inventory.accounting.users):
        if user.uid is None:
            continue
        if user.uid in taken:
            problems.add(("accounting", "users", index, "uid"), f"UID {user.uid} is also {taken[user.uid]}")
        else:
            taken[user.uid] = f"user {user.name}'s"
