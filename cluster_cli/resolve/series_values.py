"""Values Slurm reads itself: every plugin an inventory field or a free-form slurm.conf or cgroup.conf
key names must be one the target Slurm series ships (cluster_cli.slurm_facts: Debian 12's 22.05 has
no topology/block, which came with 23.11, and slurmctld does not start without it), and the free-form
keys Slurm parses as times, memory sizes, minutes or port ranges must be written as Slurm reads them,
whatever the series.

The plugins are checked by ``validate`` where ``slurm.version`` pins the series, and by ``plan``
(``series_problems``) with the version its probe finds on the hosts otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from cluster_cli.errors import Location, Problem
from cluster_cli.model import Inventory
from cluster_cli.mpi_launch import mpi_enabled, mpi_plugin
from cluster_cli.resolve.problems import Problems
from cluster_cli.slurm_keys import CGROUP_PLUGINS, MANAGED_CGROUP_KEYS, MANAGED_SLURM_KEYS, find_key
from cluster_cli.source_map import SourceMap

_WHOLE_NUMBER = re.compile(r"\d+")
_PORT_RANGE = re.compile(r"(\d+)-(\d+)")
_UNLIMITED_WORDS = frozenset({"UNLIMITED", "INFINITE"})
MANAGED_KEYS = MANAGED_SLURM_KEYS.keys() | MANAGED_CGROUP_KEYS.keys()


# Each format: None for a value written in it, else what the key takes.
def _megabytes(text: str) -> str | None:
    return None if _WHOLE_NUMBER.fullmatch(text) else "a whole number of megabytes, no unit (4096, not 4G)"


def _megabytes_or_unlimited(text: str) -> str | None:
    return None if text.upper() in _UNLIMITED_WORDS else _megabytes(text)


def _minutes_or_unlimited(text: str) -> str | None:
    return None if _WHOLE_NUMBER.fullmatch(text) or text.upper() in _UNLIMITED_WORDS else (
        "a whole number of minutes or UNLIMITED"
    )


def _port_range(text: str) -> str | None:
    found = _PORT_RANGE.fullmatch(text)
    if found is None or not 1 <= int(found.group(1)) <= int(found.group(2)) <= 65535:
        return "a port range LOW-HIGH, 1 <= LOW <= HIGH <= 65535"
    return None


# slurm.conf(5): the keys whose values Slurm parses in a format of its own (a partition line's too).
VALUE_FORMATS: dict[str, Callable[[str], str | None]] = {
    "DefMemPerCPU": _megabytes,
    "DefMemPerGPU": _megabytes,
    "DefMemPerNode": _megabytes,
    "MaxMemPerCPU": _megabytes_or_unlimited,
    "MaxMemPerNode": _megabytes_or_unlimited,
    "OverTimeLimit": _minutes_or_unlimited,
    "ResvOverRun": _minutes_or_unlimited,
    "SrunPortRange": _port_range,
}


def check_series_values(inventory: Inventory, problems: Problems) -> None:
    """The free-form keys' formats; the plugins too where `slurm.version` pins a series with facts here."""
    for location, settings in _free_form_slurm_settings(inventory):
        for key, value in settings.items():
            name = find_key(VALUE_FORMATS, key)
            if name is None or value is None:
                continue
            wanted = VALUE_FORMATS[name](str(value))  # yes/no too: "True" is in no format
            if wanted is not None:
                problems.add(location + (key,), f"{value!r}: {name} takes {wanted}")
    version = inventory.slurm.version
    if version is not None and _has_facts(version):
        for location, message in _plugin_problems(inventory, version):
            problems.add(location, message)


def series_problems(inventory: Inventory, source_file: str, version: str) -> list[Problem]:
    """The plugins of the inventory in ``source_file`` that Slurm ``version`` (a host's, as a probe
    reports it: "22.05.8-4+deb12u3") does not ship, each at its field's file:line; none for a version
    with no facts here (not installed yet, another release)."""
    if not _has_facts(version):
        return []
    found = list(_plugin_problems(inventory, version))
    if not found:
        return []  # the inventory file is read again only to point at a problem
    problems = Problems(SourceMap.of_file(source_file), source_file)
    for location, message in found:
        problems.add(location, message)
    return problems.found


def _has_facts(version: str) -> bool:
    from cluster_cli.slurm_facts import has_facts

    return has_facts(version)


def _plugin_problems(inventory: Inventory, version: str) -> Iterator[tuple[Location, str]]:
    from cluster_cli.slurm_facts import plugin_problems

    cgroup_plugin = CGROUP_PLUGINS[inventory.cgroup.version]
    fields: list[tuple[Location, str, str, str]] = [(("cgroup", "version"), "cgroup.conf", "CgroupPlugin", cgroup_plugin)]
    if inventory.topology is not None:
        topology_plugin = f"topology/{inventory.topology.plugin}"
        fields.append((("topology", "plugin"), "slurm.conf", "TopologyPlugin", topology_plugin))
    if mpi_enabled(inventory):
        fields.append((("mpi", "plugin"), "slurm.conf", "MpiDefault", mpi_plugin(inventory)))
    for location, file_name, key, value in fields:
        for message in plugin_problems(version, file_name, key, value):
            yield location, f"{key}={value}: {message}"
    conf_files = _free_form_slurm_settings(inventory)[:2]
    for (location, settings), file_name in zip(conf_files, ("slurm.conf", "cgroup.conf"), strict=True):
        for key, setting in settings.items():
            if find_key(MANAGED_KEYS, key) is None:  # those are refused as overrides already
                for message in plugin_problems(version, file_name, key, setting):
                    yield location + (key,), message


def _free_form_slurm_settings(inventory: Inventory) -> list[tuple[Location, dict[str, object]]]:
    """slurm.conf's and cgroup.conf's free-form keys, then each partition's options."""
    partitions = inventory.partitions
    return [
        (("slurm", "conf"), inventory.slurm.conf),
        (("cgroup", "overrides"), inventory.cgroup.overrides),
        *((("partitions", index, "options"), partition.options) for index, partition in enumerate(partitions)),
    ]
