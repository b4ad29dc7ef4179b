#!/usr/bin/python
"""Ansible module: the inventory's people (Linux users and groups) on one host, in one module run.

It reads the user, group and shadow databases once, refuses every account whose ids differ from
the inventory's (naming the host, the account and both ids: an account is never renumbered,
that would orphan its files), then makes the missing groups and users, keeps each user's
membership of the inventory's groups, shell, lock and SSH keys as the inventory says, locks the
users that left the inventory (a file on the host remembers whom it was given) and deletes those
marked absent. Every command is an argument list (groupadd, useradd, usermod, userdel), never a
shell. A lock is an expired account (`usermod --expiredate 1`): neither a password nor an SSH key
logs in, and the files stay. In check mode it only checks and reports.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_people
short_description: Make a host's users and groups as the inventory's people section says, in one module run
description:
  - Refuses accounts whose ids differ from the wanted ones (never renumbers), makes missing groups and users, keeps
    membership of the given groups, shells, locks and SSH keys, locks users that left the list and deletes those
    marked absent.
author: cluster-cli maintainers (!UNKNOWN)
options:
  groups:
    type: list
    elements: dict
    default: []
    description:
      - Groups with C(name) and C(gid). Membership of these groups is kept to the users' C(groups).
  users:
    type: list
    elements: dict
    default: []
    description:
      - Users with C(name), C(uid), C(group) (primary group name), C(groups) (supplementary), C(shell), C(home),
        C(ssh_keys), C(state) (present, locked, absent) and C(remove_home).
  managed_file:
    type: path
    required: true
    description:
      - JSON file on the host listing the users this module was given; those missing from C(users) later are locked.
  host:
    type: str
    default: ''
    description:
      - Prefix of every message (the inventory host name).
  shared_paths:
    type: list
    elements: path
    default: []
    description:
      - Mount points of shared file systems on this host. A home at or below one is its file server's (made there,
        with the SSH keys, where the server is this cluster's NFS server): a new user gets no home made here and
        no keys are written there (root on an NFS client is squashed and could do neither).
  root:
    type: path
    default: /
    description:
      - Tests only. Read ROOT/etc/passwd, group and shadow and pass C(--prefix ROOT) to the account commands.
"""

EXAMPLES = r"""
- name: The people of the inventory
  cluster_cli.slurm.cluster_people:
    groups: [{name: ml, gid: 5000}]
    users:
      - {name: alice, uid: 5001, group: ml, groups: [ml], shell: /bin/bash, home: /home/alice, ssh_keys: [], state: present}
    managed_file: /var/lib/cluster-cli/people.json
    host: "{{ inventory_hostname }}"
"""

RETURN = r"""
actions:
  type: list
  elements: str
  returned: always
  description: What was done (in check mode, what would be), one line each.
"""

import grp
import json
import os
import pwd
import stat
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule

# The value `usermod --expiredate 1` writes: an account this module locked (a site's own expiry
# date is left alone).
LOCKED_EXPIRY = "1"
KEYS_BEGIN = "# BEGIN cluster-cli people.users[].ssh_keys (kept by each deploy)"
KEYS_END = "# END cluster-cli people.users[].ssh_keys"


class Refused(Exception):
    """The accounts cannot be made as asked without renumbering or reusing an id."""


def _file_entries(path: str) -> list[list[str]]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return [line.rstrip("\n").split(":") for line in handle if line.strip() and not line.startswith("#")]
    except FileNotFoundError:
        return []


def read_host(root: str, params: dict | None = None) -> dict:
    """users {name: {uid, gid, home, shell}}, groups {name: {gid, members}}, expiry {name: shadow field 8},
    and the names /etc/passwd and /etc/group hold (``local_users``, ``local_groups``): through NSS on
    the host itself (a directory service's accounts included), from the files under a test root.
    ``params``: the module's; each name and id they list is also looked up by itself, since a directory
    service need not enumerate (SSSD's default, enumerate = false, lists none of its accounts in
    getpwall)."""
    etc = os.path.join(root, "etc")
    passwd = [fields for fields in _file_entries(os.path.join(etc, "passwd")) if len(fields) >= 7]
    group = [fields for fields in _file_entries(os.path.join(etc, "group")) if len(fields) >= 4]
    if root in ("", "/"):
        users = {entry.pw_name: _user_entry(entry) for entry in pwd.getpwall()}
        groups = {entry.gr_name: _group_entry(entry) for entry in grp.getgrall()}
        if params is not None:
            _look_up_each(params, users, groups)
    else:
        users = {fields[0]: {"uid": int(fields[2]), "gid": int(fields[3]), "home": fields[5], "shell": fields[6]}
                 for fields in passwd}
        groups = {fields[0]: {"gid": int(fields[2]), "members": set(filter(None, fields[3].split(",")))}
                  for fields in group}
    expiry = {fields[0]: fields[7] for fields in _file_entries(os.path.join(etc, "shadow")) if len(fields) >= 8}
    return {"users": users, "groups": groups, "expiry": expiry,
            "local_users": {fields[0] for fields in passwd}, "local_groups": {fields[0] for fields in group}}


def _user_entry(entry: pwd.struct_passwd) -> dict:
    return {"uid": entry.pw_uid, "gid": entry.pw_gid, "home": entry.pw_dir, "shell": entry.pw_shell}


def _group_entry(entry: grp.struct_group) -> dict:
    return {"gid": entry.gr_gid, "members": set(entry.gr_mem)}


def _look_up_each(params: dict, users: dict, groups: dict) -> None:
    """Add to ``users`` and ``groups`` what NSS answers for each user and group name and each UID and
    GID ``params`` lists, where getpwall and getgrall did not list it."""
    group_names = {group["name"] for group in params["groups"]}
    group_names |= {name for user in params["users"] for name in [user.get("group"), *user.get("groups", [])] if name}
    _add_found(users, pwd.getpwnam, [user["name"] for user in params["users"]], _user_entry)
    _add_found(users, pwd.getpwuid, [int(user["uid"]) for user in params["users"]], _user_entry)
    _add_found(groups, grp.getgrnam, sorted(group_names), _group_entry)
    _add_found(groups, grp.getgrgid, [int(group["gid"]) for group in params["groups"]], _group_entry)


def _add_found(table: dict, lookup: Callable[[Any], Any], keys: list, entry_of: Callable[[Any], dict]) -> None:
    for key in keys:
        try:
            entry = lookup(key)
        except KeyError:
            continue
        table.setdefault(entry[0], entry_of(entry))


def read_managed(path: str) -> dict[str, int]:
    """The users this module made or was given on the host, name -> UID (a name alone says nothing:
    a later account of that name may be someone else's)."""
    try:
        with open(path, encoding="utf-8") as handle:
            users = json.load(handle).get("users", {})
    except FileNotFoundError:
        return {}
    return {str(name): int(uid) for name, uid in users.items()} if isinstance(users, dict) else {}


def managed_after(params: dict, found: dict, managed: dict[str, int]) -> dict[str, int]:
    """The managed users once this run is done: those listed (not absent) that exist, and those
    given before whose account is still theirs (same name and UID)."""
    users = found["users"]
    kept = {name: uid for name, uid in managed.items() if users.get(name, {}).get("uid") == uid}
    for user in params["users"]:
        name = user["name"]
        if user["state"] == "absent":
            kept.pop(name, None)
        elif users.get(name, {}).get("uid") == int(user["uid"]):
            kept[name] = int(user["uid"])
    return dict(sorted(kept.items()))


def check(params: dict, found: dict) -> None:
    """Refused with every account whose ids differ and every wanted id another name holds, all at once."""
    host = f"{params['host']}: " if params["host"] else ""
    users, groups = found["users"], found["groups"]
    wanted_gid = {group["name"]: int(group["gid"]) for group in params["groups"]}
    problems = []
    for group in params["groups"]:
        name, gid = group["name"], int(group["gid"])
        if name in groups and name not in found["local_groups"]:
            problems.append(f"group {name} comes from the directory service (NSS), not /etc/group: people makes "
                            "local groups; list it in one of the two")
        elif name in groups and groups[name]["gid"] != gid:
            problems.append(f"group {name} has GID {groups[name]['gid']} here, the inventory gives {gid}")
        elif name not in groups:
            problems += [f"GID {gid} (group {name}) is group {holder}'s here" for holder, entry in groups.items()
                         if entry["gid"] == gid]
    for user in params["users"]:
        name, uid = user["name"], int(user["uid"])
        gid = wanted_gid.get(user["group"], groups.get(user["group"], {}).get("gid"))
        if user["state"] == "absent":
            continue  # deleted only where this module made it (commands)
        if name in users and name not in found["local_users"]:
            problems.append(f"user {name} comes from the directory service (NSS), not /etc/passwd: people makes "
                            "local accounts; list it in one of the two")
        elif name in users:
            have = users[name]
            if have["uid"] != uid or have["gid"] != gid:
                problems.append(f"user {name} has UID {have['uid']} and GID {have['gid']} here, the inventory "
                                f"gives UID {uid} and GID {gid}")
        else:
            problems += [f"UID {uid} (user {name}) is user {holder}'s here" for holder, entry in users.items()
                         if entry["uid"] == uid]
    if problems:
        raise Refused(f"{host}{'; '.join(problems)}. An account is never renumbered (its files would lose their "
                      "owner): change the inventory's ids to these, or renumber the account by hand "
                      "(usermod/groupmod, then chown its files).")


def commands(params: dict, found: dict, managed: dict[str, int]) -> list[tuple[str, list[str]]]:
    """(what, argv) in order: groups, users made or changed, locks, deletions."""
    prefix = [] if params["root"] in ("", "/") else ["--prefix", params["root"]]
    users, groups, expiry = found["users"], found["groups"], found["expiry"]
    ours = {group["name"] for group in params["groups"]}
    steps = [(f"group {group['name']}: made (GID {group['gid']})",
              ["groupadd", "--gid", str(group["gid"]), *prefix, group["name"]])
             for group in params["groups"] if group["name"] not in groups]
    for user in params["users"]:
        name = user["name"]
        if user["state"] == "absent":
            # only an account this module was given, still of its UID: never a site's own of that name
            if name in users and managed.get(name) == users[name]["uid"] == int(user["uid"]):
                remove = ["--remove"] if user.get("remove_home") else []
                steps.append((f"user {name}: deleted" + (" with its home" if remove else ""),
                              ["userdel", *remove, *prefix, name]))
            continue
        locked = expiry.get(name) == LOCKED_EXPIRY
        if name not in users:
            shared = on_shared(user["home"], params.get("shared_paths") or [])
            argv = ["useradd", "--uid", str(user["uid"]), "--gid", user["group"], "--shell", user["shell"],
                    "--home-dir", user["home"], "--no-create-home" if shared else "--create-home"]
            argv += ["--groups", ",".join(user["groups"])] if user["groups"] else []
            made = f"user {name}: made (UID {user['uid']}" + ("; its home is the file server's)" if shared else ")")
            steps.append((made, [*argv, *prefix, name]))
            locked = False
        else:
            member_of = {group for group, entry in groups.items() if name in entry["members"]}
            wanted = (member_of - ours) | set(user["groups"])
            if wanted != member_of:
                steps.append((f"user {name}: groups {','.join(sorted(member_of & ours)) or 'none'} -> "
                              f"{','.join(sorted(user['groups'])) or 'none'}",
                              ["usermod", "--groups", ",".join(sorted(wanted)), *prefix, name]))
            if users[name]["shell"] != user["shell"]:
                steps.append((f"user {name}: shell {users[name]['shell']} -> {user['shell']}",
                              ["usermod", "--shell", user["shell"], *prefix, name]))
        if (user["state"] == "locked") != locked:
            value = LOCKED_EXPIRY if user["state"] == "locked" else ""
            steps.append((f"user {name}: {'locked' if value else 'unlocked'}",
                          ["usermod", "--expiredate", value, *prefix, name]))
    listed = {user["name"] for user in params["users"]}
    for name, uid in managed.items():
        if name not in listed and users.get(name, {}).get("uid") == uid and expiry.get(name) != LOCKED_EXPIRY:
            steps.append((f"user {name}: not in the inventory: locked",
                          ["usermod", "--expiredate", LOCKED_EXPIRY, *prefix, name]))
    return steps


def on_shared(home: str, shared_paths: list[str]) -> bool:
    """Whether ``home`` lies at or below one of the shared file systems' mount points."""
    parts = [part for part in home.split("/") if part]
    return any(parts[:len(mount)] == mount for mount in ([part for part in path.split("/") if part] for path in shared_paths))


def keys_text(current: str, keys: list[str]) -> str:
    """authorized_keys with the inventory's block replaced (or added, or dropped when there are no
    keys); the user's own lines stay as they are."""
    lines, inside = [], False
    for line in current.splitlines():
        if line == KEYS_BEGIN:
            inside = True
        elif line == KEYS_END:
            inside = False
        elif not inside:
            lines.append(line)
    if keys:
        lines += [KEYS_BEGIN, *keys, KEYS_END]
    return "".join(f"{line}\n" for line in lines)


class Unsafe(OSError):
    """Something under a home that a root process must not read or replace."""


MAX_KEYS_FILE = 1 << 20  # an authorized_keys larger than this is no key list


def _open_dir(name: str, uid: int, dir_fd: int | None = None) -> int:
    """A directory owned by ``uid`` (or root), opened without following a link at its last name."""
    handle = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    owner = os.fstat(handle).st_uid
    if owner not in (uid, 0):
        os.close(handle)
        raise Unsafe(f"{name} belongs to UID {owner}, not the user's")
    return handle


def _read_keys_file(ssh: int, uid: int) -> tuple[str, os.stat_result | None]:
    """authorized_keys' text and its stat; refused unless a plain file of the user's or root's with
    one link (a FIFO would hang the deploy, a hard link would show another file's text)."""
    try:
        handle = os.open("authorized_keys", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=ssh)
    except FileNotFoundError:
        return "", None
    with os.fdopen(handle, "rb") as existing:
        found = os.fstat(existing.fileno())
        if not stat.S_ISREG(found.st_mode) or found.st_nlink != 1 or found.st_uid not in (uid, 0) \
                or found.st_size > MAX_KEYS_FILE:
            raise Unsafe("authorized_keys is not a plain file of the user's or root's with one link")
        return existing.read(MAX_KEYS_FILE).decode("utf-8", errors="replace"), found


def sync_keys(home: str, uid: int, gid: int, keys: list[str], write: bool) -> bool:
    """The block in HOME/.ssh/authorized_keys. The home and .ssh are opened without following a
    link and must be the user's (or root's); the file keeps its owner and mode (0600 and the user's
    when new), and is replaced by a rename inside .ssh. Refused with OSError otherwise."""
    home_fd = _open_dir(home, uid)
    try:
        try:
            ssh = _open_dir(".ssh", uid, dir_fd=home_fd)
        except FileNotFoundError:
            if not keys:
                return False
            if not write:
                return True
            os.mkdir(".ssh", 0o700, dir_fd=home_fd)
            ssh = _open_dir(".ssh", uid, dir_fd=home_fd)
            os.fchown(ssh, uid, gid)
    finally:
        os.close(home_fd)
    try:
        current, found = _read_keys_file(ssh, uid)
        text = keys_text(current, keys)
        if text == current:
            return False
        if write:
            owner = (found.st_uid, found.st_gid) if found else (uid, gid)
            mode = stat.S_IMODE(found.st_mode) if found else 0o600
            staging = f".authorized_keys.cluster-cli.{os.getpid()}"
            handle = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=ssh)
            with os.fdopen(handle, "w", encoding="utf-8") as new:
                os.fchown(new.fileno(), *owner)
                os.fchmod(new.fileno(), mode)
                new.write(text)
            os.rename(staging, "authorized_keys", src_dir_fd=ssh, dst_dir_fd=ssh)
        return True
    finally:
        os.close(ssh)


def write_managed(path: str, managed: dict[str, int]) -> None:
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    staging = f"{path}.{os.getpid()}"
    with open(staging, "w", encoding="utf-8") as handle:
        json.dump({"users": managed}, handle, sort_keys=True)
    os.replace(staging, path)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "groups": {"type": "list", "elements": "dict", "default": []},
            "users": {"type": "list", "elements": "dict", "default": []},
            "managed_file": {"type": "path", "required": True},
            "host": {"type": "str", "default": ""},
            "root": {"type": "path", "default": "/"},
            "shared_paths": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    params, root = module.params, module.params["root"]
    managed_file = os.path.join(root, params["managed_file"].lstrip("/"))
    try:
        found = read_host(root, params)
        managed = read_managed(managed_file)
        check(params, found)
        steps = commands(params, found, managed)
    except (Refused, OSError, ValueError) as error:
        module.fail_json(msg=str(error))
    except KeyError as missing:
        module.fail_json(msg=f"every group needs name and gid, every user name, uid, group and state: {missing} is missing")
    actions: list[str] = []
    written = False
    try:
        run_steps(module, steps, actions)
        now = read_host(root, params) if steps and not module.check_mode else found
        for user in params["users"]:
            if user["state"] != "absent":
                keep_keys(module, user, now, actions)
    finally:  # also after a failure: the users made so far are remembered (a later removal locks them)
        if not module.check_mode:
            after = managed_after(params, read_host(root, params) if steps else found, managed)
            written = after != managed
            if written:
                write_managed(managed_file, after)
    module.exit_json(changed=bool(actions) or written, actions=actions)


def run_steps(module: AnsibleModule, steps: list[tuple[str, list[str]]], actions: list[str]) -> None:
    for what, argv in steps:
        if not module.check_mode:
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg=f"{module.params['host']}: {' '.join(argv)} failed (exit {rc}): "
                                     f"{(err or out).strip()}", actions=actions)
        actions.append(what)


def keep_keys(module: AnsibleModule, user: dict, found: dict, actions: list[str]) -> None:
    """The user's key block; in check mode, for a user still to be made, whether there would be one."""
    entry = found["users"].get(user["name"])
    keys = list(user.get("ssh_keys") or [])
    if on_shared(user["home"], module.params["shared_paths"]):
        return  # the file server's copy of the home holds them
    if entry is None:
        if module.check_mode and keys:
            actions.append(f"user {user['name']}: SSH keys written")
        return
    home = os.path.join(module.params["root"], entry["home"].lstrip("/"))
    try:
        if sync_keys(home, int(user["uid"]), entry["gid"], keys, not module.check_mode):
            actions.append(f"user {user['name']}: SSH keys written")
    except OSError as error:
        module.fail_json(msg=f"{module.params['host']}: user {user['name']}: {home}/.ssh/authorized_keys is left as "
                             f"it is ({error}): nothing under a home is followed as a link, and only a plain file "
                             "or directory of the user's or root's is read or replaced", actions=actions)

if __name__ == "__main__":
    main()
