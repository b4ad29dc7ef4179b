"""The inventory's people (Linux users and groups) as the document roles/common applies on every
host with plugins/modules/cluster_people.py, and what applying it changes since the last deploy.

A user's primary group is one of `people.groups` or a group of its own name, made with it
(resolve/people.primary_group); the document lists both kinds of group, so the module only makes
what it is given. `plan` compares the document with the one the last deploy applied to each host
(the deploy record keeps it once, and per host its checksum).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cluster_cli.model import Inventory
from cluster_cli.resolve.people import primary_group


def people_document(inventory: Inventory) -> dict[str, Any]:
    """{"groups": [{name, gid}], "users": [{name, uid, group, groups, shell, home, ssh_keys, state, remove_home}]}."""
    people = inventory.people
    group_names = {group.gid: group.name for group in people.groups}
    names = set(group_names.values())
    groups = [{"name": group.name, "gid": group.gid} for group in people.groups]
    users = []
    for person in people.users:
        group, gid = primary_group(person, group_names)
        if group == person.name and group not in names and person.state != "absent":
            groups.append({"name": group, "gid": gid})
        users.append({
            "name": person.name, "uid": person.uid, "group": group, "groups": sorted(person.groups),
            "shell": person.shell, "home": person.home or f"/home/{person.name}", "ssh_keys": list(person.ssh_keys),
            "state": person.state, "remove_home": person.remove_home,
        })
    return {"groups": groups, "users": users}


def document_checksum(document: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def people_changes(document: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    """What applying ``document`` does on a host that holds ``before`` (None: not known, so every
    group and user is made or checked), one item per group or user, in the document's order."""
    known = before or {"groups": [], "users": []}
    had_groups = {group["name"]: group["gid"] for group in known["groups"]}
    had_users = {user["name"]: user for user in known["users"]}
    items = [_group_change(group, had_groups.get(group["name"])) for group in document["groups"]
             if had_groups.get(group["name"]) != group["gid"]]
    wanted = set()
    for user in document["users"]:
        wanted.add(user["name"])
        items += _user_change(user, had_users.get(user["name"]))
    items += [f"user {name}: not in the inventory: lock (its files stay)" for name, user in had_users.items()
              if name not in wanted and user["state"] == "present"]
    return items


def _group_change(group: dict[str, Any], had: int | None) -> str:
    if had is None:
        return f"group {group['name']}: make (GID {group['gid']})"
    return f"group {group['name']}: GID {had} -> {group['gid']}: refused by the deploy (a group is never renumbered)"


def _user_change(user: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    name = user["name"]
    if user["state"] == "absent":
        if before is not None and before["state"] == "absent":
            return []
        return [f"user {name}: delete" + (" with its home" if user["remove_home"] else " (its home stays)")]
    if before is None or before["state"] == "absent":
        made = f"user {name}: make (UID {user['uid']}, group {user['group']}"
        made += f", groups {','.join(user['groups'])})" if user["groups"] else ")"
        return [made + (", locked" if user["state"] == "locked" else "")]
    if (before["uid"], before["group"]) != (user["uid"], user["group"]):
        return [f"user {name}: UID {before['uid']} -> {user['uid']}, group {before['group']} -> {user['group']}: "
                "refused by the deploy (an account is never renumbered)"]
    differences = [f"{field} {_shown(before[field])} -> {_shown(user[field])}"
                   for field in ("state", "groups", "shell") if before[field] != user[field]]
    if before["home"] != user["home"]:
        differences.append(f"home {before['home']} -> {user['home']}: not moved by the deploy (its files stay where they are)")
    if before["ssh_keys"] != user["ssh_keys"]:
        differences.append(f"ssh keys {len(before['ssh_keys'])} -> {len(user['ssh_keys'])}")
    return [f"user {name}: " + ", ".join(differences)] if differences else []


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(value) or "none"
    return str(value)
