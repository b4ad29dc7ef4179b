"""Configless mode: what it needs from the rest of the inventory.

What Slurm 22.05's slurmctld serves to a slurmd (slurm.conf, gres.conf, cgroup.conf, topology.conf
among them) covers every file the inventory renders for the compute hosts; an `Include` line cannot
be written through the inventory, and every slurmd runs with `-N`, so `%n` in SlurmdSpoolDir and
SlurmdPidFile is expanded (Slurm's own limits of configless mode). What remains: the version
(configless came with Slurm 20.02) and the controllers' addresses, which slurmd's `--conf-server`
must be able to carry (it splits host and port at the first `:`, so no IPv6 literal).
"""

from __future__ import annotations

import re

from cluster_cli.model import Inventory
from cluster_cli.resolve.hosts import ManagedHost
from cluster_cli.resolve.problems import Problems

FIRST_CONFIGLESS_RELEASE = (20, 2)
# A Debian package version: an optional epoch, then Slurm's year.month (22.05.8-4+deb12u3, 1:23.02.1-1)
_RELEASE = re.compile(r"^(?:\d+:)?(\d+)\.(\d+)")


def check_configless(inventory: Inventory, hosts: dict[str, ManagedHost], problems: Problems) -> None:
    if not inventory.slurm.configless:
        return
    _check_version(inventory.slurm.version, problems)
    _check_controller_addresses(inventory, hosts, problems)


def _check_version(version: str | None, problems: Problems) -> None:
    release = _release(version) if version is not None else None
    if release is not None and release < FIRST_CONFIGLESS_RELEASE:
        problems.add(("slurm", "configless"), f"needs Slurm 20.02 or newer; slurm.version pins {version}")


def _release(version: str) -> tuple[int, int] | None:
    """(year, month) of a Slurm package version; None where it does not start with one."""
    match = _RELEASE.match(version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _check_controller_addresses(inventory: Inventory, hosts: dict[str, ManagedHost], problems: Problems) -> None:
    controllers = inventory.controllers
    for field, name in (("primary", controllers.primary), ("backup", controllers.backup)):
        host = hosts.get(name) if name is not None else None
        if host is not None and ":" in host.address:
            problems.add(
                ("controllers", field),
                f"configless: slurmd's --conf-server cannot name {name} by its IPv6 address {host.address} "
                "(Slurm splits host and port at the first ':'); give the host a name or an IPv4 address",
            )
