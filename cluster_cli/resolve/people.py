"""People (Linux users and groups): no name or id twice, no id or name of a daemon or of the smoke
test user, every group a user names defined, the accounting side's uid the same as the person's.

The per-field checks (name patterns, ids of at least 1000, key format) are the model's; these need
the whole inventory. Each problem is reported at the field that holds the clashing value.
"""

from __future__ import annotations

from cluster_cli.errors import Location
from cluster_cli.model import Inventory, Person
from cluster_cli.resolve.problems import Problems

# Accounts and groups a Debian host has (base-passwd, and the packages a cluster host runs), or that
# cluster-cli makes itself (the daemons' are added per inventory); names starting with `_` or
# `systemd-` are the packages' too.
RESERVED_NAMES = frozenset({
    "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
    "backup", "list", "irc", "gnats", "nobody", "nogroup", "users", "sudo", "adm", "tty", "disk", "kmem", "dialout",
    "fax", "voice", "cdrom", "floppy", "tape", "audio", "dip", "video", "plugdev", "render", "staff", "shadow", "kvm",
    "input", "sgx", "utmp", "operator", "src", "netdev", "crontab", "messagebus", "sshd", "mysql", "ntp", "postfix",
    "munge",
    # the SSSD and slapd packages' system accounts (people.directory)
    "sssd", "openldap",
})
RESERVED_PREFIXES = ("_", "systemd-")


def primary_group(person: Person, group_names: dict[int, str]) -> tuple[str, int]:
    """The user's primary group, (name, gid): the group of `people.groups` whose gid `gid` names,
    otherwise a group of the user's own name (made with it), with `gid` or, by default, the uid."""
    if person.gid is None:
        return person.name, person.uid
    return group_names.get(person.gid, person.name), person.gid


def daemon_ids(inventory: Inventory) -> tuple[dict[int, str], dict[int, str]]:
    """The uids and gids cluster-cli gives its own accounts (SlurmUser, munge, the smoke test user),
    each with the field that sets it: no user or group of the inventory may have one."""
    return ({inventory.slurm.uid: "slurm.uid", inventory.munge.uid: "munge.uid",
             inventory.training.test_user_uid: "training.test_user_uid"},
            {inventory.slurm.gid: "slurm.gid", inventory.munge.gid: "munge.gid",
             inventory.training.test_user_gid: "training.test_user_gid"})


def check_people(inventory: Inventory, problems: Problems) -> None:
    people = inventory.people
    where: Location = ("people",)
    reserved = RESERVED_NAMES | {inventory.slurm.user, inventory.training.test_user}
    taken_uids, taken_gids = daemon_ids(inventory)
    group_names: dict[int, str] = {}
    groups_by_name: dict[str, int] = {}
    for index, group in enumerate(people.groups):
        at = where + ("groups", index)
        _check_name(problems, at, group.name, "group", groups_by_name, reserved)
        groups_by_name.setdefault(group.name, group.gid)
        _check_id(problems, at + ("gid",), group.gid, "GID", taken_gids, f"group {group.name}'s")
        group_names.setdefault(group.gid, group.name)
    users_by_name: dict[str, int] = {}
    for index, person in enumerate(people.users):
        at = where + ("users", index)
        _check_name(problems, at, person.name, "user", users_by_name, reserved)
        users_by_name.setdefault(person.name, index)
        _check_id(problems, at + ("uid",), person.uid, "UID", taken_uids, f"user {person.name}'s")
        name, gid = primary_group(person, group_names)
        if person.gid is None or person.gid not in group_names:  # a group of its own name, made with the user
            if name in groups_by_name:
                problems.add(at + ("gid",), f"its own group {name!r} would have GID {gid}, but people.groups "
                                            f"gives {name!r} GID {groups_by_name[name]}: set gid: {groups_by_name[name]}")
            else:
                _check_id(problems, at + ("gid",) if person.gid is not None else at + ("uid",), gid, "GID",
                          taken_gids, f"user {person.name}'s own group's")
        for position, group_name in enumerate(person.groups):
            if group_name not in groups_by_name:
                problems.add(at + ("groups", position), f"group {group_name!r} is not defined in people.groups")
        if person.remove_home and person.state != "absent":
            problems.add(at + ("remove_home",), "only with state: absent (a present or locked user keeps its home)")
    uid_holders = {person.uid: person.name for person in people.users}
    for index, user in enumerate(inventory.accounting.users):
        if user.uid is None:
            continue
        at = ("accounting", "users", index, "uid")
        if user.name in users_by_name and user.uid != people.users[users_by_name[user.name]].uid:
            problems.add(at, f"UID {user.uid}, but people.users gives {user.name} "
                             f"UID {people.users[users_by_name[user.name]].uid}")
        elif user.name not in users_by_name and uid_holders.get(user.uid, user.name) != user.name:
            problems.add(at, f"UID {user.uid} is also user {uid_holders[user.uid]}'s (people.users)")


def _check_name(problems: Problems, at: Location, name: str, kind: str, seen: dict[str, int],
                reserved: frozenset[str]) -> None:
    if name in seen:
        problems.add(at + ("name",), f"{kind} {name!r} is defined twice")
    elif name in reserved or name.startswith(RESERVED_PREFIXES):
        problems.add(at + ("name",), f"{name!r} is a system or daemon account's name on every host")


def _check_id(problems: Problems, at: Location, number: int, kind: str, taken: dict[int, str], holder: str) -> None:
    if number in taken:
        problems.add(at, f"{kind} {number} is also {taken[number]}")
    else:
        taken[number] = holder
