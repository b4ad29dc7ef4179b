#!/usr/bin/python
"""Ansible module: a cluster's QoS, accounts and users' associations in slurmdbd, made as asked.

It reads what slurmdbd holds once (`sacctmgr show` of the cluster, QoS, accounts, users and
associations, five calls), compares it with the wanted document (cluster_cli/slurm_accounting.py
writes it) and applies only the difference: the missing QoS, accounts and users added with one
`sacctmgr add` per group of entries with the same settings (not one call per user), the changed
settings modified, what the document no longer has removed: users first (one call per account),
then accounts (children before parents, siblings in one call), then QoS (one call). Never a daemon
restart: sacctmgr changes reach slurmctld by itself.

An account or user with running or pending jobs (`squeue`) is not removed unless `force`; the
run then fails naming them, before it changes anything. Slurm's own `root` account and user and
the `normal` QoS are never removed. A field the document leaves unset (null; for QOS an empty
list) is not compared: Slurm's inherited value stays. In check mode it only reports the changes.

Values are compared after the same normalisation on both sides: times in minutes (GraceTime in
seconds), TRES as {name: count} with memory in MiB, lists as sets, names in lower case.
"""

from __future__ import annotations

import re
import time
from typing import Any

DOCUMENTATION = r"""
module: slurm_associations
short_description: Make a cluster's QoS, accounts and users' associations in slurmdbd as asked, in one module run
author: cluster-cli maintainers (!UNKNOWN)
description:
  - Reads what slurmdbd holds once, compares it with the wanted document and applies only the
    difference with sacctmgr; never restarts a daemon. Removing an account or user with running or
    pending jobs is refused unless forced.
options:
  accounting:
    type: dict
    required: true
    description: >-
      C(cluster), C(qos), C(accounts) (parents first) and C(users), with sacctmgr's field names
      (cluster_cli/slurm_accounting.py).
  remove:
    type: bool
    default: true
    description: Remove the QoS, accounts and users the document does not have.
  force:
    type: bool
    default: false
    description: Remove accounts and users even with running or pending jobs.
  unknown_tres:
    type: str
    choices: [skip, wait]
    default: wait
    description: >-
      A limit on a TRES slurmdbd does not know yet (gres/gpu exists once slurmctld registered its
      AccountingStorageTRES): C(skip) leaves it out (the run before slurmctld starts), C(wait) waits for
      it up to C(tres_wait_s) and fails naming it.
  tres_wait_s:
    type: int
    default: 60
    description: How long C(wait) waits for slurmctld to register the TRES.
"""

RETURN = r"""
changes:
  type: list
  returned: always
  description: >-
    Each change: C(kind) (qos, account, user), C(action) (add, modify, remove), C(name),
    C(account) (users), C(fields) ({field: [before, after]}).
commands:
  type: list
  returned: always
  description: "The sacctmgr argument lists run (in check mode: that would run)."
"""

ROOT = "root"
SLURM_QOS = "normal"
SACCTMGR = ["sacctmgr", "--noheader", "--parsable2"]
QOS_FORMAT = [
    "Name", "Description", "Priority", "Preempt", "PreemptMode", "GraceTime", "UsageFactor", "Flags",
    "MaxTRESPU", "MaxTRES", "GrpTRES", "MaxJobsPU", "MaxSubmitPU", "MaxWall",
]
ASSOC_LIMITS = ["Fairshare", "DefaultQOS", "QOS", "GrpTRES", "MaxTRES", "GrpJobs", "MaxJobs", "MaxSubmit", "MaxWall"]
ASSOC_FORMAT = ["Account", "User", "Partition", "ParentName", *ASSOC_LIMITS]
# each field's kind: how its value is normalised and how sacctmgr is told to clear it
KINDS = {
    "Description": "text", "Organization": "text", "Priority": "int0", "Preempt": "names", "PreemptMode": "mode",
    "GraceTime": "seconds", "UsageFactor": "factor", "Flags": "names", "MaxTRESPU": "tres", "MaxTRES": "tres",
    "GrpTRES": "tres", "MaxJobsPU": "int", "MaxSubmitPU": "int", "MaxWall": "minutes", "Fairshare": "int",
    "DefaultQOS": "name", "QOS": "names", "GrpJobs": "int", "MaxJobs": "int", "MaxSubmit": "int",
}
# fields that are not compared when the document leaves them empty: Slurm's inherited value stays
UNMANAGED_WHEN_EMPTY = {"DefaultQOS", "QOS"}
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.IGNORECASE)
_MIB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


class Refused(Exception):
    """The document cannot be applied as asked (jobs in what it would remove)."""


# ---- normalisation ---------------------------------------------------------------------------


def minutes(value: Any) -> int | None:
    """A Slurm time (MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in whole minutes; None for
    none or unlimited. sacctmgr shows 60 minutes as 01:00:00 and one day as 1-00:00:00."""
    text = "" if value is None else str(value).strip()
    if text in ("", "-1") or text.upper() in ("INFINITE", "UNLIMITED"):
        return None
    found = _TIME.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a Slurm time")
    days, first, second, third = found.groups()
    parts = [int(first)] + [int(part) for part in (second, third) if part is not None]
    if days is not None:  # D-HH[:MM[:SS]]
        return int(days) * 1440 + parts[0] * 60 + (parts[1] if len(parts) > 1 else 0)
    if len(parts) == 3:  # HH:MM:SS
        return parts[0] * 60 + parts[1]
    return parts[0]  # MINUTES or MM:SS


def seconds(value: Any) -> int:
    """GraceTime: sacctmgr shows HH:MM:SS (or D-HH:MM:SS); the document gives seconds."""
    text = "" if value is None else str(value).strip()
    if text in ("", "-1"):
        return 0
    if text.isdigit():
        return int(text)
    days, _, clock = text.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return (int(days or 0) * 86400) + parts[0] * 3600 + parts[1] * 60 + parts[2]


def tres(value: Any) -> dict[str, int]:
    """{name: count} from a document's mapping or sacctmgr's `cpu=4,gres/gpu=2,mem=1G`; memory in MiB."""
    if value is None or value == "":
        return {}
    pairs = value.items() if isinstance(value, dict) else (item.split("=", 1) for item in str(value).split(",") if item)
    found: dict[str, int] = {}
    for name, count in pairs:
        size = _SIZE.match(str(count).strip())
        if size is None:
            raise ValueError(f"{name}={count}: not a TRES count")
        number = float(size.group(1)) * _MIB[size.group(2).upper()]
        if int(number) >= 0:
            found[str(name).strip().lower()] = int(number)
    return found


def normal(field: str, value: Any) -> Any:
    kind = KINDS[field]
    text = "" if value is None else value
    if kind == "text":
        return str(text)
    if kind == "int0":
        return int(text or 0)
    if kind == "int":
        return None if text in ("", -1, "-1") else int(text)
    if kind == "factor":
        return round(float(text or 1), 6)
    if kind == "names":
        items = text if isinstance(text, list) else str(text).split(",")
        return sorted({str(item).strip().lower() for item in items if str(item).strip()})
    if kind == "name":
        return str(text).lower() or None
    if kind == "mode":
        return str(text or "cluster").lower()
    if kind == "seconds":
        return seconds(text)
    if kind == "minutes":
        return minutes(text)
    return tres(text)  # "tres"


def setting(field: str, value: Any, before: Any) -> list[str]:
    """The `Field=value` words that make ``field`` the normalised ``value`` (clearing with sacctmgr's -1)."""
    kind = KINDS[field]
    if kind == "tres":
        wanted = dict(value)
        cleared = {name: -1 for name in before or {} if name not in wanted}
        merged = {**cleared, **wanted}
        return [f"{field}={','.join(f'{name}={count}' for name, count in sorted(merged.items()))}"]
    if kind == "names":
        return [f"{field}={','.join(value)}" if value else f"{field}=''"]
    if value is None:
        return [f"{field}=-1"]
    return [f"{field}={value}"]


# ---- reading ---------------------------------------------------------------------------------


def read_commands(cluster: str) -> dict[str, list[str]]:
    return {
        "clusters": [*SACCTMGR, "show", "cluster", "format=Cluster"],
        "qos": [*SACCTMGR, "show", "qos", "format=" + ",".join(QOS_FORMAT)],
        "accounts": [*SACCTMGR, "show", "account", "format=Account,Description,Organization"],
        "users": [*SACCTMGR, "show", "user", "format=User,DefaultAccount"],
        "assocs": [
            *SACCTMGR, "show", "association", "where", f"cluster={cluster}", "WOPLimits",
            "format=" + ",".join(ASSOC_FORMAT),
        ],
    }


def rows(text: str, fields: list[str]) -> list[dict[str, str]]:
    found = []
    for line in text.splitlines():
        if line.strip():
            values = line.split("|")
            found.append(dict(zip(fields, values + [""] * (len(fields) - len(values)))))
    return found


def current_state(outputs: dict[str, str]) -> dict[str, Any]:
    """What slurmdbd holds, from the five `sacctmgr show` outputs (read_commands' keys)."""
    state: dict[str, Any] = {
        "clusters": {row["Cluster"].lower() for row in rows(outputs["clusters"], ["Cluster"])},
        "qos": {row["Name"].lower(): row for row in rows(outputs["qos"], QOS_FORMAT)},
        "accounts": {},
        "users": {},
        "default_account": {
            row["User"]: row["DefaultAccount"].lower() for row in rows(outputs["users"], ["User", "DefaultAccount"])
        },
    }
    info = {
        row["Account"].lower(): row for row in rows(outputs["accounts"], ["Account", "Description", "Organization"])
    }
    for row in rows(outputs["assocs"], ASSOC_FORMAT):
        if row["Partition"]:
            continue  # per-partition associations are the site's own
        account = row["Account"].lower()
        if row["User"]:
            state["users"][(row["User"], account)] = row
        else:
            extra = info.get(account, {})
            state["accounts"][account] = {
                **row, "Description": extra.get("Description", ""), "Organization": extra.get("Organization", "")
            }
    return state


TRES_FIELDS = ("MaxTRESPU", "MaxTRES", "GrpTRES")


def known_tres(text: str) -> set[str]:
    """`sacctmgr show tres format=Type,Name` (cpu|, gres|gpu, gres|gpu:h100) as limit names (gres/gpu)."""
    names = set()
    for line in text.splitlines():
        kind, _, name = line.strip().partition("|")
        if kind:
            names.add(f"{kind}/{name}".lower() if name else kind.lower())
    return names


def unknown_tres(document: dict[str, Any], known: set[str]) -> list[str]:
    """The TRES the document's limits name that slurmdbd does not know."""
    named = {
        name.lower()
        for part in ("qos", "accounts", "users") for entry in document.get(part, [])
        for field in TRES_FIELDS for name in (entry.get(field) or {})
    }
    return sorted(named - known)


def without_tres(document: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The document with its limits on ``names`` left out (they are applied by a later run)."""
    def trimmed(entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry, **{
            field: {name: count for name, count in (entry.get(field) or {}).items() if name.lower() not in names}
            for field in TRES_FIELDS if field in entry
        }}
    return {**document, **{part: [trimmed(entry) for entry in document.get(part, [])] for part in ("qos", "accounts", "users")}}


# ---- the difference --------------------------------------------------------------------------


def _differences(wanted: dict[str, Any], have: dict[str, Any] | None, fields: list[str]) -> dict[str, list[Any]]:
    changed: dict[str, list[Any]] = {}
    for field in fields:
        if field not in wanted:
            continue
        goal = normal(field, wanted[field])
        if field in UNMANAGED_WHEN_EMPTY and not goal:
            continue
        before = normal(field, have.get(field)) if have is not None else None
        if have is None and not goal and goal != 0:
            continue  # a new entry without the setting: Slurm's default
        if goal != before:
            changed[field] = [before, goal]
    return changed


QOS_FIELDS = QOS_FORMAT[1:]
ACCOUNT_FIELDS = ["Description", "Organization", *ASSOC_LIMITS]


def diff(document: dict[str, Any], state: dict[str, Any], remove: bool = True) -> list[dict[str, Any]]:
    """The changes that make ``state`` what ``document`` asks, in the order they must be made."""
    changes: list[dict[str, Any]] = []
    wanted_qos = {qos["name"]: qos for qos in document.get("qos", [])}
    for name, qos in wanted_qos.items():
        have = state["qos"].get(name)
        fields = _differences(qos, have, QOS_FIELDS)
        if have is None:
            changes.append({"kind": "qos", "action": "add", "name": name, "fields": fields})
        elif fields:
            changes.append({"kind": "qos", "action": "modify", "name": name, "fields": fields})
    wanted_accounts = {account["name"]: account for account in document.get("accounts", [])}
    for name, account in wanted_accounts.items():
        have = state["accounts"].get(name)
        fields = _differences(account, have, ACCOUNT_FIELDS)
        if have is not None and have.get("ParentName", "").lower() != account["parent"]:
            fields["parent"] = [have.get("ParentName", ""), account["parent"]]
        if have is None:
            changes.append({"kind": "account", "action": "add", "name": name, "parent": account["parent"], "fields": fields})
        elif fields:
            changes.append({"kind": "account", "action": "modify", "name": name, "fields": fields})
    wanted_users: dict[tuple[str, str], dict[str, Any]] = {}
    for user in document.get("users", []):
        for account in user["accounts"]:
            wanted_users[(user["name"], account)] = user
    for (name, account), user in wanted_users.items():
        have = state["users"].get((name, account))
        fields = _differences(user, have, ASSOC_LIMITS)
        if have is None:
            changes.append({"kind": "user", "action": "add", "name": name, "account": account,
                            "default_account": user["DefaultAccount"], "fields": fields})
        elif fields:
            changes.append({"kind": "user", "action": "modify", "name": name, "account": account, "fields": fields})
    for user in document.get("users", []):
        before = state["default_account"].get(user["name"])
        if before is not None and before != user["DefaultAccount"]:
            changes.append({"kind": "user", "action": "modify", "name": user["name"], "account": "",
                            "fields": {"DefaultAccount": [before, user["DefaultAccount"]]}})
    if not remove:
        return changes
    for name, account in sorted(state["users"]):
        if (name, account) not in wanted_users and name != ROOT:
            changes.append({"kind": "user", "action": "remove", "name": name, "account": account, "fields": {}})
    parents = {name: row.get("ParentName", "").lower() for name, row in state["accounts"].items()}
    gone = [name for name in state["accounts"] if name not in wanted_accounts and name != ROOT]
    for name in sorted(gone, key=lambda item: -_depth(item, parents)):
        changes.append({"kind": "account", "action": "remove", "name": name, "parent": parents.get(name, ""),
                        "fields": {}})
    for name in sorted(state["qos"]):
        if name not in wanted_qos and name != SLURM_QOS:
            changes.append({"kind": "qos", "action": "remove", "name": name, "fields": {}})
    return changes


def _depth(name: str, parents: dict[str, str]) -> int:
    depth, seen = 0, set()
    while name in parents and name not in seen:
        seen.add(name)
        name = parents[name]
        depth += 1
    return depth


def refusals(changes: list[dict[str, Any]], jobs: list[tuple[str, str]], force: bool) -> list[str]:
    """The removals of accounts and users that still have running or pending jobs ((account, user) pairs)."""
    if force:
        return []
    busy = []
    for change in changes:
        if change["action"] != "remove" or change["kind"] == "qos":
            continue
        if change["kind"] == "user":
            count = sum(1 for account, user in jobs if user == change["name"] and account == change["account"])
            what = f"user {change['name']} in account {change['account']}"
        else:
            count = sum(1 for account, _ in jobs if account == change["name"])
            what = f"account {change['name']}"
        if count:
            busy.append(f"{what} has {count} running or pending job(s)")
    return busy


# ---- the commands ----------------------------------------------------------------------------


def _words(fields: dict[str, list[Any]]) -> list[str]:
    words: list[str] = []
    for field, (before, after) in sorted(fields.items()):
        if field == "parent":
            words.append(f"Parent={after}")
        elif field == "DefaultAccount":
            words.append(f"DefaultAccount={after}")
        else:
            words += setting(field, after, before)
    return words


def commands(changes: list[dict[str, Any]], cluster: str, cluster_exists: bool) -> list[list[str]]:
    """The sacctmgr argument lists of ``changes``: entries added with the same settings in one call."""
    run = ["sacctmgr", "--immediate"]
    argvs: list[list[str]] = []
    if not cluster_exists:
        argvs.append([*run, "add", "cluster", cluster])
    added_qos = [change["name"] for change in changes if change["kind"] == "qos" and change["action"] == "add"]
    if added_qos:
        argvs.append([*run, "add", "qos", ",".join(added_qos)])
    # QoS settings after every QoS exists (Preempt names others)
    for change in changes:
        if change["kind"] == "qos" and change["action"] in ("add", "modify") and change["fields"]:
            argvs.append([*run, "modify", "qos", "where", f"name={change['name']}", "set", *_words(change["fields"])])
    # accounts: one add per parent and settings, in the document's order (parents first); a
    # Description or Organization that is sacctmgr's own default for the account is left to it,
    # so that accounts differing only there are one call
    groups: dict[tuple[str, ...], list[str]] = {}
    for change in changes:
        if change["kind"] == "account" and change["action"] == "add":
            fields = _without_defaults(change["name"], change["parent"], change["fields"])
            key = (f"cluster={cluster}", f"parent={change['parent']}", *_words(fields))
            groups.setdefault(key, []).append(change["name"])
    argvs += [[*run, "add", "account", ",".join(names), *key] for key, names in groups.items()]
    for change in changes:
        if change["kind"] == "account" and change["action"] == "modify":
            argvs.append([*run, "modify", "account", "where", f"name={change['name']}", f"cluster={cluster}",
                          "set", *_words(change["fields"])])
    groups = {}
    for change in changes:
        if change["kind"] == "user" and change["action"] == "add":
            key = (f"cluster={cluster}", f"account={change['account']}",
                   f"defaultaccount={change['default_account']}", *_words(change["fields"]))
            groups.setdefault(key, []).append(change["name"])
    argvs += [[*run, "add", "user", ",".join(names), *key] for key, names in groups.items()]
    for change in changes:
        if change["kind"] == "user" and change["action"] == "modify":
            where = [f"name={change['name']}"]
            if change["account"]:
                where += [f"account={change['account']}", f"cluster={cluster}"]
            argvs.append([*run, "modify", "user", "where", *where, "set", *_words(change["fields"])])
    # removals: users one call per account, accounts one per parent (children before their
    # parents: the changes' order), QoS in one call
    # (kind, the group its members share, the rest of the where clause) -> names
    removals: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for change in changes:
        if change["action"] != "remove":
            continue
        removal: tuple[str, str, tuple[str, ...]]
        if change["kind"] == "user":
            removal = ("user", change["account"], (f"account={change['account']}", f"cluster={cluster}"))
        elif change["kind"] == "account":
            removal = ("account", change.get("parent", ""), (f"cluster={cluster}",))
        else:
            removal = ("qos", "", ())
        removals.setdefault(removal, []).append(change["name"])
    for (kind, _, clause), names in removals.items():
        argvs.append([*run, "delete", kind, "where", f"name={','.join(names)}", *clause])
    return argvs


def _without_defaults(name: str, parent: str, fields: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """An added account's fields less a Description or Organization sacctmgr would set itself: the
    account's name, and its parent's (its own below root)."""
    defaults = {"Description": name, "Organization": parent if parent != ROOT else name}
    return {field: values for field, values in fields.items() if defaults.get(field, object()) != values[1]}


def main() -> None:  # pragma: no cover - run by Ansible (tests/deploy)
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(
        argument_spec={
            "accounting": {"type": "dict", "required": True},
            "remove": {"type": "bool", "default": True},
            "force": {"type": "bool", "default": False},
            "unknown_tres": {"type": "str", "choices": ["skip", "wait"], "default": "wait"},
            "tres_wait_s": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    document = module.params["accounting"]
    cluster = document["cluster"]
    outputs = {}
    for name, argv in read_commands(cluster).items():
        rc, out, err = module.run_command(argv)
        if rc != 0:
            module.fail_json(msg=f"{' '.join(argv)} failed: {err.strip() or out.strip()}")
        outputs[name] = out
    tres_argv = [*SACCTMGR, "show", "tres", "format=Type,Name"]
    deadline = time.monotonic() + module.params["tres_wait_s"]
    while True:
        rc, out, err = module.run_command(tres_argv)
        if rc != 0:
            module.fail_json(msg=f"{' '.join(tres_argv)} failed: {err.strip() or out.strip()}")
        missing = unknown_tres(document, known_tres(out))
        if not missing or module.params["unknown_tres"] == "skip" or time.monotonic() > deadline:
            break
        time.sleep(1)
    if missing and module.params["unknown_tres"] == "skip":
        document = without_tres(document, missing)
    elif missing:
        module.fail_json(msg=f"slurmdbd knows no TRES {', '.join(missing)} after {module.params['tres_wait_s']} s: "
                             "slurmctld registers them from AccountingStorageTRES when it starts")
    state = current_state(outputs)
    changes = diff(document, state, module.params["remove"])
    argvs = commands(changes, cluster, cluster.lower() in state["clusters"])
    if any(change["action"] == "remove" and change["kind"] != "qos" for change in changes):
        rc, out, err = module.run_command(["squeue", "--noheader", "--all", "--format=%a|%u"])
        if rc != 0 and not module.params["force"]:
            module.fail_json(msg=f"cannot tell whether what would be removed has jobs (squeue: {err.strip()})",
                             changes=changes)
        jobs = [tuple(line.lower().split("|", 1)) for line in out.splitlines() if "|" in line]
        busy = refusals(changes, jobs, module.params["force"])
        if busy:
            module.fail_json(msg="refused, nothing changed: " + "; ".join(busy) + " (force to remove anyway)",
                             changes=changes)
    if not module.check_mode:
        for argv in argvs:
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg=f"{' '.join(argv)} failed: {err.strip() or out.strip()}", commands=argvs)
    module.exit_json(changed=bool(argvs), changes=changes, commands=argvs)


if __name__ == "__main__":
    main()
