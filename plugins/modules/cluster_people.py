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


def read_host(root: str) -> dict:
    """users {name: {uid, gid, home, shell}}, groups {name: {gid, members}}, expiry {name: shadow field 8}:
    through NSS on the host itself, from the files under a test root."""
    etc = os.path.join(root, "etc")
    if root in ("", "/"):
        users = {entry.pw_name: {"uid": entry.pw_uid, "gid": entry.pw_gid, "home": entry.pw_dir, "shell": entry.pw_shell}
                 for entry in pwd.getpwall()}
        groups = {entry.gr_name: {"gid": entry.gr_gid, "members": set(entry.gr_mem)} for entry in grp.getgrall()}
    else:
        users = {fields[0]: {"uid": int(fields[2]), "gid": int(fields[3]), "home": fields[5], "shell": fields[6]}
                 for fields in _file_entries(os.path.join(etc, "passwd")) if len(fields) >= 7}
        groups = {fields[0]: {"gid": int(fields[2]), "members": set(filter(None, fields[3].split(",")))}
                  for fields in _file_entries(os.path.join(etc, "group")) if len(fields) >= 4}
    expiry = {fields[0]: fields[7] for fields in _file_entries(os.path.join(etc, "shadow")) if len(fields) >= 8}
    return {"users": users, "groups": groups, "expiry": expiry}


def read_managed(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return list(json.load(handle).get("users", []))
    except FileNotFoundError:
        return []


def check(params: dict, found: dict) -> None:
    """Refused with every account whose ids differ and every wanted id another name holds, all at once."""
    host = f"{params['host']}: " if params["host"] else ""
    users, groups = found["users"], found["groups"]
    wanted_gid = {group["name"]: int(group["gid"]) for group in params["groups"]}
    problems = []
    for group in params["groups"]:
        name, gid = group["name"], int(group["gid"])
        if name in groups and groups[name]["gid"] != gid:
            problems.append(f"group {name} has GID {groups[name]['gid']} here, the inventory gives {gid}")
        elif name not in groups:
            problems += [f"GID {gid} (group {name}) is group {holder}'s here" for holder, entry in groups.items()
                         if entry["gid"] == gid]
    for user in params["users"]:
        name, uid = user["name"], int(user["uid"])
        gid = wanted_gid.get(user["group"], groups.get(user["group"], {}).get("gid"))
        if name in users:
            have = users[name]
            if have["uid"] != uid or (user["state"] != "absent" and have["gid"] != gid):
                problems.append(f"user {name} has UID {have['uid']} and GID {have['gid']} here, the inventory "
                                f"gives UID {uid} and GID {gid}")
        elif user["state"] != "absent":
            problems += [f"UID {uid} (user {name}) is user {holder}'s here" for holder, entry in users.items()
                         if entry["uid"] == uid]
    if problems:
        raise Refused(f"{host}{'; '.join(problems)}. An account is never renumbered (its files would lose their "
                      "owner): change the inventory's ids to these, or renumber the account by hand "
                      "(usermod/groupmod, then chown its files).")


def commands(params: dict, found: dict, managed: list[str]) -> list[tuple[str, list[str]]]:
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
            if name in users:
                remove = ["--remove"] if user.get("remove_home") else []
                steps.append((f"user {name}: deleted" + (" with its home" if remove else ""),
                              ["userdel", *remove, *prefix, name]))
            continue
        locked = expiry.get(name) == LOCKED_EXPIRY
        if name not in users:
            argv = ["useradd", "--uid", str(user["uid"]), "--gid", user["group"], "--shell", user["shell"],
                    "--home-dir", user["home"], "--create-home"]
            argv += ["--groups", ",".join(user["groups"])] if user["groups"] else []
            steps.append((f"user {name}: made (UID {user['uid']})", [*argv, *prefix, name]))
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
    for name in managed:
        if name not in listed and name in users and expiry.get(name) != LOCKED_EXPIRY:
            steps.append((f"user {name}: not in the inventory: locked",
                          ["usermod", "--expiredate", LOCKED_EXPIRY, *prefix, name]))
    return steps


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


def sync_keys(home: str, uid: int, gid: int, keys: list[str], write: bool) -> bool:
    """The block in HOME/.ssh/authorized_keys, written as the user would own it. Nothing under the
    home is followed as a link (a user could point .ssh elsewhere): refused with OSError."""
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        ssh = os.open(os.path.join(home, ".ssh"), os.O_RDONLY | os.O_DIRECTORY | nofollow)
    except FileNotFoundError:
        if not keys:
            return False
        if not write:
            return True
        os.mkdir(os.path.join(home, ".ssh"), 0o700)
        ssh = os.open(os.path.join(home, ".ssh"), os.O_RDONLY | os.O_DIRECTORY | nofollow)
        os.fchown(ssh, uid, gid)
    try:
        try:
            handle = os.open("authorized_keys", os.O_RDONLY | nofollow, dir_fd=ssh)
            with os.fdopen(handle, encoding="utf-8", errors="replace") as existing:
                current = existing.read()
        except FileNotFoundError:
            current = ""
        text = keys_text(current, keys)
        if text == current:
            return False
        if write:
            staging = f".authorized_keys.cluster-cli.{os.getpid()}"
            handle = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow, 0o600, dir_fd=ssh)
            with os.fdopen(handle, "w", encoding="utf-8") as new:
                os.fchown(new.fileno(), uid, gid)
                new.write(text)
            os.rename(staging, "authorized_keys", src_dir_fd=ssh, dst_dir_fd=ssh)
        return True
    finally:
        os.close(ssh)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "groups": {"type": "list", "elements": "dict", "default": []},
            "users": {"type": "list", "elements": "dict", "default": []},
            "managed_file": {"type": "path", "required": True},
            "host": {"type": "str", "default": ""},
            "root": {"type": "path", "default": "/"},
        },
        supports_check_mode=True,
    )
    params, root = module.params, module.params["root"]
    managed_file = os.path.join(root, params["managed_file"].lstrip("/"))
    try:
        found = read_host(root)
        managed = read_managed(managed_file)
        check(params, found)
        steps = commands(params, found, managed)
    except (Refused, OSError, ValueError) as error:
        module.fail_json(msg=str(error))
    except KeyError as missing:
        module.fail_json(msg=f"every group needs name and gid, every user name, uid, group and state: {missing} is missing")
    actions: list[str] = []
    for what, argv in steps:
        if not module.check_mode:
            rc, out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg=f"{params['host']}: {' '.join(argv)} failed (exit {rc}): {(err or out).strip()}",
                                 actions=actions)
        actions.append(what)
    now = read_host(root) if steps and not module.check_mode else found
    for user in params["users"]:
        entry = now["users"].get(user["name"])
        if user["state"] == "absent" or (entry is None and not module.check_mode):
            continue
        home = os.path.join(root, (entry["home"] if entry else user["home"]).lstrip("/"))
        try:
            if sync_keys(home, int(user["uid"]), entry["gid"] if entry else 0, list(user.get("ssh_keys") or []),
                         not module.check_mode):
                actions.append(f"user {user['name']}: SSH keys written")
        except OSError as error:
            module.fail_json(msg=f"{params['host']}: user {user['name']}: cannot write {home}/.ssh/authorized_keys "
                                 f"({error}); links there are not followed", actions=actions)
    kept = sorted((set(managed) | {user["name"] for user in params["users"]})
                  - {user["name"] for user in params["users"] if user["state"] == "absent"})
    if kept != managed and not module.check_mode:
        os.makedirs(os.path.dirname(managed_file), mode=0o755, exist_ok=True)
        staging = f"{managed_file}.{os.getpid()}"
        with open(staging, "w", encoding="utf-8") as handle:
            json.dump({"users": kept}, handle)
        os.replace(staging, managed_file)
    module.exit_json(changed=bool(actions) or kept != managed, actions=actions)


if __name__ == "__main__":
    main()
