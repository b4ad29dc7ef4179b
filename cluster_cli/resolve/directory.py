"""The site's LDAP directory (people.directory): TLS unless asked otherwise, the control node's CA
and bind password files usable, and the inventory's own people outside the directory's id range
(one UID with two names would give files to whichever a host resolves first)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cluster_cli.site_directory import MANAGED_KEYS, bind_password_path, clear_text_uris, read_bind_password, uses_tls
from cluster_cli.site_files import SiteFileError, read_ca
from cluster_cli.errors import Location
from cluster_cli.model import Inventory
from cluster_cli.resolve.people import primary_group
from cluster_cli.resolve.problems import Problems


def check_directory(inventory: Inventory, problems: Problems) -> None:
    directory = inventory.people.directory
    if directory is None:
        return
    at: Location = ("people", "directory")
    clear = clear_text_uris(directory)
    if clear and not directory.insecure:
        problems.add(at + ("start_tls",), f"{', '.join(clear)} without StartTLS would send the bind password and "
                                          "every lookup in clear text: set start_tls: true, use ldaps://, or set insecure: true")
    if directory.ca_file is None and uses_tls(directory):
        problems.add(at + ("uri",), "TLS needs the CA that signed the servers' certificates: set ca_file")
    elif directory.ca_file is not None:
        _check_file(problems, at + ("ca_file",), lambda: read_ca(Path(directory.ca_file or "")))
    password = bind_password_path(inventory)
    if password is not None:
        field = "bind_password_file" if directory.bind_password_file is not None else "bind_dn"
        _check_file(problems, at + (field,), lambda: read_bind_password(password))
    elif directory.bind_password_file is not None:
        problems.add(at + ("bind_password_file",), "a bind password without bind_dn: set bind_dn, or remove it")
    for key in sorted(MANAGED_KEYS & set(directory.options)):
        problems.add(at + ("options", key), "set by the fields of people.directory (uri, base_dn, ldap_schema, "
                                            "start_tls, ca_file, bind_dn, min_id, max_id); not an option")
    if directory.min_id > directory.max_id:
        problems.add(at + ("max_id",), f"{directory.max_id} is below min_id {directory.min_id}")
        return
    _check_people_outside(inventory, directory.min_id, directory.max_id, problems)


def _check_file(problems: Problems, at: Location, read: Callable[[], str]) -> None:
    try:
        read()
    except SiteFileError as error:
        problems.add(at, str(error))


def _check_people_outside(inventory: Inventory, low: int, high: int, problems: Problems) -> None:
    inside = f"inside the directory's id range {low}-{high} (people.directory min_id, max_id)"
    people = inventory.people
    for index, group in enumerate(people.groups):
        if low <= group.gid <= high:
            problems.add(("people", "groups", index, "gid"), f"GID {group.gid} of group {group.name} is {inside}")
    group_names = {group.gid: group.name for group in people.groups}
    for index, person in enumerate(people.users):
        at = ("people", "users", index)
        if low <= person.uid <= high:
            problems.add(at + ("uid",), f"UID {person.uid} of user {person.name} is {inside}")
        name, gid = primary_group(person, group_names)
        if name == person.name and low <= gid <= high and person.gid is not None:
            problems.add(at + ("gid",), f"GID {gid} of user {person.name}'s own group is {inside}")
