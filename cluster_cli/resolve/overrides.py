"""Free-form Slurm keys (slurm.conf, cgroup.conf and oci.conf overrides, partition options): none may set what the
inventory sets from its own fields (a whole key, or an item of a list-valued key), none may repeat
another in a different case, and the slurm.conf and cgroup.conf ones must be keys the target Slurm
version documents (cluster_cli.slurm_facts).
"""

from __future__ import annotations

from collections.abc import Iterator

from cluster_cli.errors import Location
from cluster_cli.model import Inventory
from cluster_cli.resolve.problems import Problems
from cluster_cli.slurm_keys import (
    MANAGED_CGROUP_KEYS,
    MANAGED_PARTITION_KEYS,
    MANAGED_SLURM_KEYS,
    OWNED_SLURM_LIST_ITEMS,
    find_key,
    item_name,
    list_items,
)


def check_overrides(inventory: Inventory, problems: Problems) -> None:
    for index, partition in enumerate(inventory.partitions):
        for key, field in _managed_keys(partition.options, MANAGED_PARTITION_KEYS):
            problems.add(("partitions", index, "options", key), f"set it with the field '{field}'")
    # Slurm reads its keys case-insensitively: `clustername` is ClusterName
    _check_case_repeats(("slurm", "conf"), inventory.slurm.conf, problems)
    _check_case_repeats(("cgroup", "overrides"), inventory.cgroup.overrides, problems)
    _check_case_repeats(("containers", "oci_conf"), inventory.containers.oci_conf, problems)
    for index, partition in enumerate(inventory.partitions):
        _check_case_repeats(("partitions", index, "options"), partition.options, problems)
    for location, settings, managed in (
        (("slurm", "conf"), inventory.slurm.conf, MANAGED_SLURM_KEYS),
        (("cgroup", "overrides"), inventory.cgroup.overrides, MANAGED_CGROUP_KEYS),
    ):
        for key, field in _managed_keys(settings, managed):
            problems.add(location + (key,), f"set by the inventory: use {field}")
    _check_owned_items(inventory.slurm.conf, problems)
    _check_documented_keys(inventory, problems)
    _check_oci_conf_keys(inventory, problems)


def _check_oci_conf_keys(inventory: Inventory, problems: Problems) -> None:
    """Each `containers.oci_conf` key must be one the target series' oci.conf(5) documents
    (cluster_cli/containers.py keeps each series' list: Debian ships no oci.conf man page). A series
    without a list is not checked."""
    if not inventory.containers.oci_conf:
        return
    from cluster_cli.containers import oci_conf_keys
    from cluster_cli.slurm_facts import DEFAULT_SERIES, UnknownSlurmVersion, series

    try:
        target = series(inventory.slurm.version or DEFAULT_SERIES)
    except UnknownSlurmVersion:
        return
    keys = oci_conf_keys(target)
    if keys is None:
        return
    documented = {key.lower(): key for key in keys}
    for key in inventory.containers.oci_conf:
        if key.lower() not in documented:
            problems.add(("containers", "oci_conf", key), _unknown_key_message(key, "oci.conf", target, documented))


def _check_documented_keys(inventory: Inventory, problems: Problems) -> None:
    """Each slurm.conf and cgroup.conf key must be one the target version's man page documents. A
    version without key lists here is not checked (the deploy then treats unknown keys as needing a
    restart)."""
    if not inventory.slurm.conf and not inventory.cgroup.overrides:
        return  # nothing to look up: the man pages' key lists are not read (render at scale, issue 17)
    from cluster_cli.slurm_facts import DEFAULT_SERIES, UnknownSlurmVersion, known_keys, series

    try:
        target = series(inventory.slurm.version or DEFAULT_SERIES)
    except UnknownSlurmVersion:
        return
    for location, settings, file_name in (
        (("slurm", "conf"), inventory.slurm.conf, "slurm.conf"),
        (("cgroup", "overrides"), inventory.cgroup.overrides, "cgroup.conf"),
    ):
        documented = {key.lower(): key for key in known_keys(target, file_name)}
        for key in settings:
            if key.lower() not in documented:
                problems.add(location + (key,), _unknown_key_message(key, file_name, target, documented))


def _unknown_key_message(key: str, file_name: str, target: str, documented: dict[str, str]) -> str:
    import difflib  # only for an inventory with a mistake

    message = f"not a {file_name} key of Slurm {target} ({file_name}(5))"
    close = difflib.get_close_matches(key.lower(), documented, n=1, cutoff=0.85)
    return f"{message}: did you mean {documented[close[0]]}?" if close else message


def _check_owned_items(settings: dict[str, object], problems: Problems) -> None:
    """Items of list-valued slurm.conf keys that an inventory field sets (``enable_configless``)."""
    for key, value in settings.items():
        owned = OWNED_SLURM_LIST_ITEMS.get(find_key(OWNED_SLURM_LIST_ITEMS, key) or "", {})
        for item in list_items(value):
            name = find_key(owned, item_name(item))
            if name is not None:
                problems.add(("slurm", "conf", key), f"{name} is set by the inventory: use {owned[name]}")


def _check_case_repeats(location: Location, settings: dict[str, object], problems: Problems) -> None:
    first: dict[str, str] = {}
    for key in settings:
        if key.lower() in first:
            message = f"the same key as '{first[key.lower()]}': Slurm ignores case in keys"
            problems.add(location + (key,), message)
        first.setdefault(key.lower(), key)


def _managed_keys(settings: dict[str, object], managed: dict[str, str]) -> Iterator[tuple[str, str]]:
    """Each key of ``settings`` that ``managed`` names, compared without case as Slurm compares keys,
    with the field that sets it."""
    for key in settings:
        name = find_key(managed, key)
        if name is not None:
            yield key, managed[name]
