#!/usr/bin/python
"""Ansible module: a host's fixed-id groups and users, checked and created in one module run.

getent, an assert per account, a warning and `group`/`user` in a loop cost one task result each
per host (17 ms of the control node's main process and 60 ms of its CPU each); a deploy to a
thousand hosts pays that for every account task. This module takes the whole set: it reads the
user and group databases once, checks every wanted account against them, then creates the missing
groups and users (groupadd/useradd, argument lists, never a shell), in that order.

An existing account is never modified: renumbering a live account would orphan every file owned
by its old id. A strict account with other ids, or a wanted id another name already holds (for an
account still to be created), fails the run before anything is created; a non-strict account with
other ids is kept as it is, with a warning. In check mode it only checks and reports what it would
create.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_accounts
short_description: Check a host's fixed-id groups and users and create the missing ones in one module run
description:
  - Reads the user and group databases once, checks every wanted account against them, then creates the missing
    groups and users (groupadd, useradd), in that order.
  - An existing account is never modified. A strict account with other ids, or a wanted id another name already holds,
    fails the run before anything is created; a non-strict account with other ids is kept, with a warning. In check
    mode it only checks and reports what it would create.
author: cluster-cli maintainers (!UNKNOWN)
options:
  groups:
    type: list
    elements: dict
    default: []
    description:
      - Groups with C(name), C(gid), C(system) (bool) and C(strict) (bool, other ids fail rather than warn).
  users:
    type: list
    elements: dict
    default: []
    description:
      - Users with C(name), C(uid), C(group) (primary group name, one of C(groups) or existing), C(system), C(home),
        C(create_home), C(shell), C(comment) and C(strict).
  host:
    type: str
    default: ''
    description:
      - Prefix of every message (the inventory host name).
  mismatch_hint:
    type: str
    default: ''
    description:
      - Appended to the failure about strict accounts with other ids.
  taken_hint:
    type: str
    default: ''
    description:
      - Appended to the failure about wanted ids other names hold.
  kept_note:
    type: str
    default: ''
    description:
      - Why a non-strict account with other ids is kept (in its warning).
  root:
    type: path
    default: /
    description:
      - Tests only. Read ROOT/etc/passwd and group and pass C(--prefix ROOT) to groupadd and useradd.
"""

EXAMPLES = r"""
- name: The slurm group and user, 64030 on every host
  cluster_cli.slurm.cluster_accounts:
    groups:
      - {name: slurm, gid: 64030, system: true, strict: true}
    users:
      - {name: slurm, uid: 64030, group: slurm, system: true, home: /nonexistent, shell: /usr/sbin/nologin, strict: true}
    host: "{{ inventory_hostname }}"
"""

RETURN = r"""
created:
  type: dict
  returned: always
  description: C(groups) and C(users), the names created (in check mode, that would be created).
kept:
  type: list
  elements: str
  returned: always
  description: The non-strict accounts kept with other ids (the warnings' text).
"""

import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.parsing.convert_bool import boolean


class Refused(Exception):
    """The accounts cannot be made as asked without renumbering or reusing an id."""


def _parse(path: str, id_field: int) -> dict[str, list[str]]:
    """{name: [name, password, id, ...]} of a passwd or group file, in file order."""
    entries: dict[str, list[str]] = {}
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.rstrip("\n").split(":")
            if len(fields) > id_field and fields[0] and not fields[0].startswith(("+", "-", "#")):
                entries.setdefault(fields[0], fields)
    return entries


def read_databases(root: str) -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """users {name: (uid, gid)} and groups {name: gid}, ids as strings: through NSS (what getent
    lists) on the host itself, from the files under a test root."""
    if root in ("", "/"):
        users = {entry.pw_name: (str(entry.pw_uid), str(entry.pw_gid)) for entry in pwd.getpwall()}
        groups = {entry.gr_name: str(entry.gr_gid) for entry in grp.getgrall()}
        return users, groups
    passwd = _parse(os.path.join(root, "etc", "passwd"), 3)
    group = _parse(os.path.join(root, "etc", "group"), 2)
    return ({name: (fields[2], fields[3]) for name, fields in passwd.items()},
            {name: fields[2] for name, fields in group.items()})


def _flag(item: dict, key: str, default: bool = False) -> bool:
    """A yes/no of an item; "false" (a templated string) is false."""
    try:
        return boolean(item.get(key, default), strict=True)
    except TypeError:
        raise Refused(f"{item.get('name')}: {key} must be true or false, not {item.get(key)!r}") from None


def _id(value: object) -> str:
    """An id as getent writes it: a decimal without sign or leading zeros ("064030" and 64030 alike)."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if number < 0:
        raise Refused(f"{value!r} is not a user or group id")
    return str(number)


def plan(params: dict, users: dict[str, tuple[str, str]], groups: dict[str, str]) -> tuple[list, list, list[str]]:
    """The groups and users to create, and the warnings about kept accounts; Refused with every
    strict mismatch and every taken id, all at once."""
    host = f"{params['host']}: " if params["host"] else ""
    wanted_gid = {group["name"]: _id(group["gid"]) for group in params["groups"]}
    mismatches: list[tuple[bool, str]] = []  # (strict, what differs)
    taken: list[str] = []
    new_groups, new_users = [], []
    for group in params["groups"]:
        name, gid = group["name"], _id(group["gid"])
        if name in groups:
            if groups[name] != gid:
                mismatches.append((_flag(group, "strict", True), f"group {name} has GID {groups[name]}, expected {gid}"))
            continue
        holders = [holder for holder, held in groups.items() if held == gid]
        taken += [f"GID {gid} belongs to group {holder}, so group {name} cannot be created with it" for holder in holders]
        new_groups.append(group)
    for user in params["users"]:
        name, uid, primary = user["name"], _id(user["uid"]), user["group"]
        if primary not in wanted_gid and primary not in groups:
            raise Refused(f"{host}user {name}: its primary group {primary} neither exists nor is among the groups to create.")
        if name in users:
            strict = _flag(user, "strict", True)
            have_uid, have_gid = users[name]
            if have_uid != uid:
                mismatches.append((strict, f"user {name} has UID {have_uid}, expected {uid}"))
            expected_gid = wanted_gid.get(primary, groups.get(primary))
            if have_gid != expected_gid:
                mismatches.append((strict, f"user {name} has primary GID {have_gid}, expected {expected_gid}"))
            continue
        holders = [holder for holder, (held, _gid) in users.items() if held == uid]
        taken += [f"UID {uid} belongs to user {holder}, so user {name} cannot be created with it" for holder in holders]
        new_users.append(user)
    errors = []
    strict_ones = [text for strict, text in mismatches if strict]
    if strict_ones:
        errors.append(f"{host}{'; '.join(strict_ones)}. {params['mismatch_hint']}".strip())
    if taken:
        errors.append(f"{host}{'; '.join(taken)}. {params['taken_hint']}".strip())
    if errors:
        raise Refused(" ".join(errors))
    note = f" ({params['kept_note']})" if params["kept_note"] else ""
    kept = [f"{host}{text}: kept as it is{note}." for strict, text in mismatches if not strict]
    return new_groups, new_users, kept


def groupadd_argv(group: dict, root: str) -> list[str]:
    argv = ["groupadd", "--gid", _id(group["gid"])]
    if _flag(group, "system"):
        argv.append("--system")
    if root not in ("", "/"):
        argv += ["--prefix", root]
    return argv + [group["name"]]


def useradd_argv(user: dict, root: str) -> list[str]:
    argv = ["useradd", "--uid", _id(user["uid"]), "--gid", user["group"]]
    if _flag(user, "system"):
        argv.append("--system")
    argv.append("--create-home" if _flag(user, "create_home") else "--no-create-home")
    for key, option in (("home", "--home-dir"), ("shell", "--shell"), ("comment", "--comment")):
        if user.get(key) not in (None, ""):
            argv += [option, str(user[key])]
    if root not in ("", "/"):
        argv += ["--prefix", root]
    return argv + [user["name"]]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "groups": {"type": "list", "elements": "dict", "default": []},
            "users": {"type": "list", "elements": "dict", "default": []},
            "host": {"type": "str", "default": ""},
            "mismatch_hint": {"type": "str", "default": ""},
            "taken_hint": {"type": "str", "default": ""},
            "kept_note": {"type": "str", "default": ""},
            "root": {"type": "path", "default": "/"},
        },
        supports_check_mode=True,
    )
    params, root = module.params, module.params["root"]
    try:
        users, groups = read_databases(root)
        new_groups, new_users, kept = plan(params, users, groups)
        # Groups first: a new user's primary group may be one of them.
        commands = [("groups", group["name"], groupadd_argv(group, root)) for group in new_groups]
        commands += [("users", user["name"], useradd_argv(user, root)) for user in new_users]
    except (Refused, OSError) as error:
        module.fail_json(msg=str(error))
    except KeyError as missing:
        module.fail_json(msg=f"every group needs name and gid, every user name, uid and group: {missing} is missing")
    for text in kept:
        module.warn(text)
    created: dict[str, list[str]] = {"groups": [], "users": []}
    result = {"changed": bool(commands), "created": created, "kept": kept}
    for kind, name, argv in commands:
        if not module.check_mode:
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg=f"{' '.join(argv)} failed (exit {rc}): {(err or out).strip()}", **result)
        created[kind].append(name)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
