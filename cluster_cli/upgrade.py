"""`cluster-cli upgrade`: Slurm to a new version, in SchedMD's order, with the jobs kept.

The preflight (here, from one probe per host) refuses what SchedMD does not support, before any
host is touched: a host that cannot be probed, a skip over more major releases than the target
accepts (``slurm_facts.upgrade_path_problem`` names the releases to go through), a downgrade.
playbooks/upgrade.yml then checks on the hosts what only they can tell (systemd, the target
version in their apt sources, a writable backup directory) and upgrades: slurmdbd (after a
mysqldump into a 0600 file; its first start converts the database, given a long timeout),
slurmctld (backup, then primary; StateSaveLocation archived and kept), the login hosts, then
slurmd in batches.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass

from cluster_cli.ansible.runner import TaskFailure
from cluster_cli.cluster import Cluster
from cluster_cli.errors import RefusedError
from cluster_cli.probe import PROBED_PACKAGES, HostProbe
from cluster_cli.slurm_facts import UnknownSlurmVersion, series, upgrade_path_problem

# The packages whose versions decide what a host runs: the Slurm ones among those the probe reads.
SLURM_PACKAGES = tuple(name for name in PROBED_PACKAGES if name.startswith("slurm"))
# slurmdbd's first start on a new release converts the accounting database: SchedMD warns it can
# take hours on a large database, and a daemon killed half-way leaves it to be restored.
CONVERSION_TIMEOUT_S = 6 * 3600
# The daemons playbooks/upgrade.yml names in its task names, to find the log of a failure.
DAEMONS = ("slurmdbd", "slurmctld", "slurmd")
_UPSTREAM = re.compile(r"^(?:\d+:)?(\d+(?:\.\d+)*)")


class UpgradeRefused(RefusedError):
    """The preflight refused the upgrade: nothing was touched (exit 2)."""


@dataclass(frozen=True)
class UpgradeRun:
    """What the playbook is given (run_vars.yml)."""

    version: str
    batch: int
    backup_file: str
    state_backup_file: str

    def extra_vars(self) -> dict[str, object]:
        return {
            "upgrade_version": self.version,
            "upgrade_batch": self.batch,
            "upgrade_backup_file": self.backup_file,
            "upgrade_state_backup_file": self.state_backup_file,
            "upgrade_conversion_timeout_s": CONVERSION_TIMEOUT_S,
        }


def target_version(cluster: Cluster, requested: str | None) -> str:
    """The version to upgrade to: ``--to`` or the inventory's ``slurm.version``; they must agree,
    or the next deploy would install the other one."""
    pin = cluster.inventory.slurm.version
    if requested is None and pin is None:
        raise UpgradeRefused("no target version: set slurm.version in the inventory (a Debian package "
                             "version, e.g. 26.05.5-1) or give --to VERSION")
    if requested is not None and pin is not None and requested != pin:
        raise UpgradeRefused(f"--to {requested}, but the inventory pins slurm.version: {pin}; set slurm.version "
                             f"to {requested} first, so that the next deploy keeps the version the upgrade installs")
    target = requested or pin or ""
    try:
        series(target)
    except UnknownSlurmVersion as error:
        raise UpgradeRefused(f"target {target}: {error}") from None
    return target


def installed(probe: HostProbe) -> dict[str, str]:
    """The Slurm packages a host has, with their versions."""
    return {name: version for name, version in probe.packages.items() if name in SLURM_PACKAGES and version}


def upstream(version: str) -> tuple[int, ...]:
    """``"1:24.11.5-4+deb13u1"`` -> ``(24, 11, 5)``."""
    found = _UPSTREAM.match(version)
    return tuple(int(part) for part in found.group(1).split(".")) if found else ()


def version_problem(version: str, target: str) -> str | None:
    """Why ``version`` cannot go to ``target`` in one upgrade, or None."""
    if upstream(version) > upstream(target):
        return f"{version} is newer than {target}: downgrades are not supported (SchedMD upgrade guide)"
    try:
        return upgrade_path_problem(version, target)
    except UnknownSlurmVersion as error:
        return str(error)


def preflight_problems(probes: dict[str, HostProbe], target: str) -> list[str]:
    """Everything that refuses the upgrade, one line each; hosts sharing a problem are named together."""
    unreachable = [f"{name}: could not be probed: {probe.error}" for name, probe in probes.items() if probe.error]
    bare = [name for name, probe in probes.items() if not probe.error and not installed(probe)]
    by_problem: dict[str, list[str]] = defaultdict(list)
    for name, probe in probes.items():
        for package, version in sorted(installed(probe).items()) if not probe.error else []:
            problem = version_problem(version, target)
            if problem:
                by_problem[problem].append(f"{name} ({package} {version})")
    lines = unreachable + ([f"{', '.join(bare)}: no Slurm package installed: deploy first"] if bare else [])
    return lines + [f"{', '.join(where)}: {problem}" for problem, where in by_problem.items()]


def hosts_to_upgrade(probes: dict[str, HostProbe], target: str) -> dict[str, dict[str, str]]:
    """Each host with a Slurm package not at ``target``: those packages and their versions."""
    found = {name: {pkg: ver for pkg, ver in installed(probe).items() if ver != target}
             for name, probe in probes.items()}
    return {name: packages for name, packages in found.items() if packages}


def check_preflight(probes: dict[str, HostProbe], target: str) -> None:
    problems = preflight_problems(probes, target)
    if problems:
        raise UpgradeRefused("upgrade refused, nothing was touched:\n  " + "\n  ".join(problems))


def backup_files(cluster: Cluster, backup_dir: str, stamp: str | None = None) -> tuple[str, str]:
    """The mysqldump file (database host) and the StateSaveLocation archive (primary controller)."""
    when = stamp or time.strftime("%Y%m%d-%H%M%S")
    base = backup_dir.rstrip("/") or "/"
    database = cluster.inventory.accounting.database
    return (f"{base}/{database}-{cluster.name}-{when}.sql",
            f"{base}/statesave-{cluster.name}-{when}.tar.gz")


def failure_daemon(failure: TaskFailure) -> str | None:
    """The daemon a failed task of playbooks/upgrade.yml was about (its name says it)."""
    words = set(re.findall(r"[a-z]+", failure.task.lower()))
    return next((daemon for daemon in DAEMONS if daemon in words), None)
