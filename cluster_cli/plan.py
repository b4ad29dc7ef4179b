"""`cluster-cli plan`: what a deploy would change on each host, and what that does to running jobs.

The plan compares the rendered files and the inventory with what the probes found. Whether a
change needs `scontrol reconfigure` or a restart is decided by ``slurm_facts.host_conf_change``, the
same function the roles call through the ``slurm_conf_change`` filter: one home for the rule.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.deployed import DeployedRecord
from cluster_cli.errors import ExitCode, InventoryError
from cluster_cli.host_files import SLURM_CONFIGS, HostFile, files_by_host
from cluster_cli.hostlist import expand
from cluster_cli.containers import CONTAINER_ROLES, container_packages, missing_image_note
from cluster_cli.mpi_launch import MPI_ROLES
from cluster_cli.ownership import ExpectedSecrets, conflict_lines, conflicts as ownership_conflicts, owner_requests, proven_ours
from cluster_cli.people_accounts import document_checksum as people_checksum, people_changes, people_document
from cluster_cli.shared_storage import packages_by_host
from cluster_cli.shared_venv import shared_venv_notes
from cluster_cli.render.mount_units import UNITS_DIR
from cluster_cli.probe import DIRECTORY_PROBED_PACKAGE, HostProbe, accounting_host, probe_cluster
from cluster_cli.resolve.series_values import series_problems
from cluster_cli.slurm_accounting import REMOVE_UNLISTED, accounting_document, document_checksum
from cluster_cli.slurm_associations import current_state, diff as accounting_diff
from cluster_cli.slurm_facts import ConfChange, host_conf_change
from cluster_cli.source_map import SourceMap
from cluster_cli.stranded import JobOnNodes, NodeAllocation, stranded_nodes

# Lines whose value is a secret are masked in every diff a plan prints.
SECRET_LINE = re.compile(r"(?i)^(\s*[\w.]*(pass|password|secret|token|key)\w*\s*[=:]\s*)\S.*$")
# The Slurm configuration files by name: host_files.SLURM_CONFIGS without their build-directory folder.
SLURM_FILES = tuple(source.removeprefix("slurm/") for source in SLURM_CONFIGS)


class Impact(str, Enum):
    NONE = "none"
    RECONFIGURE = "reconfigure"
    RESTART_SLURMCTLD = "restart slurmctld"
    RESTART_SLURMD = "restart slurmd"
    RESTART_SLURMDBD = "restart slurmdbd"
    START = "start"
    STOP = "stop"
    NODE_ADD = "node add"
    NODE_REMOVE = "node remove"
    PACKAGE = "package change"
    FILE = "file change"
    DRIFT = "drift"
    ACCOUNTING = "sacctmgr only"
    PEOPLE = "users and groups"


@dataclass(frozen=True)
class Change:
    host: str
    subject: str  # a file path, a daemon, a node or a package
    impact: Impact
    detail: str = ""
    diff: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "subject": self.subject, "impact": self.impact.value,
                "detail": self.detail, "diff": self.diff}


@dataclass
class Plan:
    cluster: str
    slurm_version: str | None
    changes: list[Change] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    jobs: list[dict[str, str]] = field(default_factory=list)
    # hosts the deploy record does not know that hold this cluster's slurm.conf and munge key (a
    # lost record: deploy records them again from what they hold)
    unrecorded: list[str] = field(default_factory=list)
    # nodes slurmctld holds allocated with no job on them (stranded.py), with their evidence
    stranded: list[str] = field(default_factory=list)
    # what a deploy does that is no change of a host's own: the training environment installed once
    # on shared storage (shared_venv)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> ExitCode:
        if self.unreachable or self.conflicts:
            return ExitCode.FAILURE
        return ExitCode.CHANGES if self.changes else ExitCode.OK

    def hosts_to_apply(self) -> list[str]:
        return sorted({change.host for change in self.changes})

    def by_impact(self, impact: Impact) -> list[Change]:
        return [change for change in self.changes if change.impact is impact]

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "slurm_version": self.slurm_version,
            "changes": [change.to_json() for change in self.changes],
            "unreachable": self.unreachable,
            "conflicts": self.conflicts,
            "running_jobs": self.jobs,
            "unrecorded": self.unrecorded,
            "stranded": self.stranded,
            "notes": self.notes,
            "exit_code": int(self.exit_code),
        }


def masked(text: str) -> str:
    return "\n".join(SECRET_LINE.sub(r"\1********", line) for line in text.splitlines())


def unified_diff(old: str, new: str, path: str) -> str:
    lines = difflib.unified_diff(
        masked(old).splitlines(), masked(new).splitlines(), f"{path} (on the host)", f"{path} (rendered)", lineterm=""
    )
    return "\n".join(lines)


def make_plan(
    cluster: Cluster,
    files_by_host: dict[str, list[HostFile]],
    rendered: dict[str, str],
    probes: dict[str, HostProbe],
    record: DeployedRecord,
    rotating: bool = False,
) -> Plan:
    """``rotating``: a deploy --rotate-secrets, which adopts hosts whose secrets are not this
    control node's (ownership)."""
    version = _slurm_version(probes)
    plan = Plan(cluster.name, version)
    plan.unreachable = {name: probe.error for name, probe in probes.items() if probe.error}
    foreign = ownership_conflicts(cluster, probes, rotating)
    plan.conflicts = conflict_lines(foreign)
    held = probes.get(cluster.inventory.controllers.primary)
    if held is not None and held.controller:
        plan.conflicts += _state_conflicts(cluster, held.controller)
    # A host of another cluster is that cluster's: none of its differences is a change of this one.
    probes = {name: probe for name, probe in probes.items() if name not in foreign}
    plan.unrecorded = sorted(name for name, probe in probes.items()
                             if not probe.error and name not in record.hosts and proven_ours(cluster, probe))
    primary = probes.get(cluster.inventory.controllers.primary)
    if primary is not None and primary.controller:
        plan.jobs = [job for job in primary.controller.get("jobs", []) if job["state"] == "RUNNING"]
        plan.stranded = _stranded(primary.controller)
    plan.notes = shared_venv_notes(cluster) + _image_notes(cluster, probes)
    decisions = _Decisions(version)
    diffs: dict[tuple[str, str | None], str] = {}
    # the primary first: configless hosts without files follow its decision
    order = sorted(probes, key=lambda name: name != cluster.inventory.controllers.primary)
    storage_packages = packages_by_host(cluster.inventory, cluster.hosts)
    for name in order:
        probe = probes[name]
        if probe.error:
            continue
        files = files_by_host.get(name, [])
        found = _package_changes(cluster, name, cluster.hosts[name].roles, probe, storage_packages.get(name, []))
        found += stale_mount_changes(name, probe)
        found += _file_changes(name, files, rendered, probe, record, diffs)
        if version:
            change = decisions.for_host(files, rendered, probe, name == cluster.inventory.controllers.primary)
            found += _daemon_changes(cluster, name, files, probe, change)
        plan.changes += found + _owed_and_stale(name, probe, found)
    plan.changes += people_changes_by_host(cluster, [name for name in order if not probes[name].error], record)
    plan.changes += _retired(cluster, record)
    database = accounting_host(cluster)
    answer = probes[database].accounting if database in probes else None
    if database is not None and answer:
        plan.changes += accounting_changes(cluster, database, answer, record)
    if primary is not None and primary.controller and not primary.controller.get("error"):
        node_changes = _node_changes(cluster, primary.controller, plan.jobs)
        added = {f"slurmd@{change.subject}" for change in node_changes if change.impact is Impact.NODE_ADD}
        # A new node's slurmd does not run yet: its "node add" says it all.
        plan.changes = [change for change in plan.changes if change.subject not in added] + node_changes
    return plan


def plan_cluster(
    cluster: Cluster, rendered: dict[str, str], munge_key: bytes, record: DeployedRecord,
    secrets: ExpectedSecrets, rotating: bool = False,
) -> tuple[Plan, dict[str, list[HostFile]]]:
    """Probe every host (its files, daemons and owner) and compare: the plan, and the files each
    host should hold."""
    files = files_by_host(cluster, rendered, munge_key)
    probes = probe_cluster(cluster, files, owner_requests(cluster, secrets))
    check_series(cluster, _slurm_version(probes))
    return make_plan(cluster, files, rendered, probes, record, rotating), files


def check_series(cluster: Cluster, version: str | None) -> None:
    """An inventory that pins no ``slurm.version`` is checked against the series the hosts run:
    a plugin that series does not ship is an invalid inventory (exit 2, file:line), as ``validate``
    finds it where the version is pinned (resolve/series_values)."""
    if cluster.inventory.slurm.version is None and version:
        problems = series_problems(cluster.inventory, cluster.source_file, version)
        if problems:
            raise InventoryError(problems)


def _image_notes(cluster: Cluster, probes: dict[str, HostProbe]) -> list[str]:
    """containers.image where a compute host answered that it holds no root filesystem there."""
    image = cluster.inventory.containers.image
    if not image:
        return []
    lacking = sorted(name for name, probe in probes.items() if probe.images.get(image) is False)
    if not lacking:
        return []
    line = SourceMap.of_file(cluster.source_file).line_of(("containers", "image"))
    return [missing_image_note(f"{cluster.source_file}:{line}", image, lacking)]


def _stranded(controller: dict[str, Any]) -> list[str]:
    nodes = [NodeAllocation(node["name"], node["state"]) for node in controller.get("nodes", [])]
    jobs = [JobOnNodes(job["state"], job.get("end", ""), job["nodes"]) for job in controller.get("jobs", [])]
    return [node.evidence for node in stranded_nodes(nodes, jobs)]


def _slurm_version(probes: dict[str, HostProbe]) -> str | None:
    for probe in probes.values():
        version = probe.packages.get("slurm-client") if not probe.error else None
        if version:
            return version
    return None


def _state_conflicts(cluster: Cluster, controller: dict[str, Any]) -> list[str]:
    # Slurm 24.11 and later keep "NAME|CLUSTER_ID" in StateSaveLocation/clustername (seen on the
    # trixie test bed: "tbmolup|600"); 22.05 keeps the name alone.
    held = (controller.get("state_cluster_name") or "").split("|")[0]
    if not held or held == cluster.name:
        return []
    state_dir = cluster.inventory.slurm.paths.state_dir
    return [
        f"{cluster.inventory.controllers.primary}: {state_dir} holds the state of cluster '{held}', not "
        f"'{cluster.name}': slurmctld would refuse to start (CLUSTER NAME MISMATCH). Tear that cluster down "
        f"with its own inventory (cluster-cli teardown THAT_INVENTORY --purge), or move {state_dir} away, "
        f"or give this cluster another slurm.paths.state_dir."
    ]


def accounting_changes(
    cluster: Cluster, host: str, found: dict[str, Any], record: DeployedRecord,
) -> list[Change]:
    """What the accounting data's apply (plugins/modules/slurm_associations.py, the same
    comparison) would change in slurmdbd: each QoS, account and association to add, change or
    remove, through sacctmgr alone (no daemon restarts). Differences while the inventory's data is
    what the last deploy applied were made by hand: drift, which deploy puts back."""
    if found.get("error"):
        return [Change(host, "accounting data", Impact.ACCOUNTING,
                       f"cannot read slurmdbd ({found['error']}): deploy applies the inventory's")]
    document = accounting_document(cluster)
    state = current_state(found.get("outputs", {}))
    drifted = record.accounting.get(host) == document_checksum(document)
    changes = []
    if cluster.name.lower() not in state["clusters"]:
        changes.append(Change(host, f"cluster {cluster.name}", Impact.ACCOUNTING, "not registered: add"))
    for change in accounting_diff(document, state, REMOVE_UNLISTED):
        subject = f"{change['kind']} {change['name']}"
        if change.get("account"):
            subject += f" in {change['account']}"
        detail = _accounting_detail(change)
        if drifted:
            detail = f"changed by hand since the last deploy: {detail}"
        changes.append(Change(host, subject, Impact.DRIFT if drifted else Impact.ACCOUNTING, detail))
    return changes


def people_changes_by_host(cluster: Cluster, hosts: list[str], record: DeployedRecord) -> list[Change]:
    """Per host, the users and groups the deploy makes, changes, locks or deletes there since the
    people document it was given last (cluster_cli.people_accounts; every one of them where that is not known)."""
    document = people_document(cluster.inventory)
    checksum = people_checksum(document)
    changes = []
    detail_since: dict[str | None, str] = {}  # hosts given the same document share one comparison
    for host in hosts:
        held, before = record.people_held(host)
        if held == checksum:
            continue
        if held not in detail_since:
            detail_since[held] = "; ".join(people_changes(document, before))
        if detail_since[held]:
            changes.append(Change(host, "people", Impact.PEOPLE, detail_since[held]))
    return changes


def _accounting_detail(change: dict[str, Any]) -> str:
    if change["action"] == "remove":
        return "not in the inventory: remove (refused while it has jobs)"
    if change["action"] == "add":
        below = f" below {change['parent']}" if change.get("parent") else ""
        settings = "; ".join(f"{name}={_shown(after)}" for name, (_, after) in sorted(change["fields"].items()))
        return f"add{below}" + (f": {settings}" if settings else "")
    return "; ".join(f"{name} {_shown(before)} -> {_shown(after)}" for name, (before, after)
                     in sorted(change["fields"].items()))


def _shown(value: Any) -> str:
    """A normalised sacctmgr value (slurm_associations.normal) as plan prints it."""
    if value is None or value == "" or (isinstance(value, (dict, list, set, frozenset, tuple)) and not value):
        return "none"
    if isinstance(value, dict):
        return ",".join(f"{name}={count}" for name, count in sorted(value.items()))
    if isinstance(value, (list, set, frozenset, tuple)):
        return ",".join(sorted(str(item) for item in value))
    return str(value)


def _package_changes(cluster: Cluster, host: str, roles: frozenset[str], probe: HostProbe,
                     storage_packages: list[str]) -> list[Change]:
    """``storage_packages``: the clients of the host's mounts (shared_storage.packages_by_host)."""
    wanted = ["munge", "slurm-client"]
    wanted += ["slurmctld"] if "controller" in roles else []
    wanted += ["slurmd"] if "compute" in roles else []
    wanted += ["slurmdbd"] if "database" in roles else []
    monitoring = cluster.inventory.monitoring
    if monitoring.host is not None:
        wanted += ["prometheus-node-exporter"]
        wanted += ["prometheus"] if "monitoring" in roles else []
        wanted += ["prometheus-alertmanager"] if "monitoring" in roles and monitoring.alertmanager else []
    wanted += cluster.mpi_packages if roles & MPI_ROLES else []
    wanted += container_packages(cluster.inventory) if roles & CONTAINER_ROLES else []
    wanted += [DIRECTORY_PROBED_PACKAGE] if cluster.inventory.people.directory is not None else []
    wanted += storage_packages
    pin = cluster.inventory.slurm.version
    changes = []
    for package in wanted:
        installed = probe.packages.get(package)
        if installed is None:
            changes.append(Change(host, package, Impact.PACKAGE, "not installed: install"))
        elif pin and package.startswith("slurm") and installed != pin:
            changes.append(Change(host, package, Impact.PACKAGE, f"{installed} installed, the inventory pins {pin}"))
    return changes


def stale_mount_changes(host: str, probe: HostProbe) -> list[Change]:
    """The host's mounts the inventory no longer has (cluster-cli's units there, probe.stale_mounts):
    unmounted and removed by the deploy, or, while processes use the mount, left as they are; and
    its own mount points nothing is mounted on (probe.unmounted)."""
    changes = []
    for mount in probe.stale_mounts:
        subject = f"{UNITS_DIR}/{mount['unit']}"
        users = mount.get("users") or []
        if not mount.get("mounted"):
            detail = f"{mount['path']} is no longer in storage.mounts: remove the unit (not mounted)"
        elif not users:
            detail = f"{mount['path']} is no longer in storage.mounts: unmount it and remove the unit"
        else:
            shown = ", ".join(str(pid) for pid in users[:5]) + (f" and {len(users) - 5} more" if len(users) > 5 else "")
            detail = (f"{mount['path']} is no longer in storage.mounts, but processes use it (pids {shown}): "
                      "waits, the deploy leaves it mounted until nothing uses it")
        changes.append(Change(host, subject, Impact.FILE, detail))
    return changes + [Change(host, path, Impact.START, "not mounted: mount") for path in probe.unmounted]


def _file_changes(
    host: str, files: list[HostFile], rendered: dict[str, str], probe: HostProbe, record: DeployedRecord,
    diffs: dict[tuple[str, str | None], str],
) -> list[Change]:
    """``diffs`` keeps each diff by the two checksums: hosts holding the same file share it."""
    changes = []
    for item in files:
        found = probe.files.get(item.path, {})
        have = found.get("sha256")
        if "error" in found:
            changes.append(Change(host, item.path, Impact.FILE, f"cannot be read: {found['error']}"))
            continue
        if have == item.sha256:
            continue
        drifted = have is not None and record.knows(host, item.path) and not record.deployed(host, item.path, have)
        impact = Impact.DRIFT if drifted else Impact.FILE
        if item.sha256 is None:
            detail = "no longer part of the cluster: remove"
        elif have is None:
            detail = "missing: copy"
        elif item.secret:
            detail = "differs from the control node's copy (a secret: compared by checksum only)"
        else:
            detail = "changed by hand since the last deploy" if drifted else "differs from the rendered file"
        diff = ""
        if not item.secret and "text" in found:
            key = (str(have), item.sha256)
            if key not in diffs:
                diffs[key] = unified_diff(found["text"], rendered.get(item.source, ""), item.path)
            diff = diffs[key]
        changes.append(Change(host, item.path, impact, detail, diff))
    return changes


def _old_and_new(files: list[HostFile], rendered: dict[str, str], probe: HostProbe) -> tuple[dict, dict, tuple]:
    """Each Slurm file's text on the host (as far as the probe sent it) and as rendered, and a key
    of their checksums: hosts holding the same files share one decision."""
    old: dict[str, str | None] = {}
    new: dict[str, str | None] = {}
    key = []
    for item in files:
        if item.name not in SLURM_FILES or (item.sha256 is None and item.source in rendered):
            continue  # not a Slurm file, or one this (configless) host must not hold
        found = probe.files.get(item.path, {})
        new[item.name] = rendered.get(item.source)
        old[item.name] = found.get("text", new[item.name]) if not found.get("absent") else None
        key.append((item.name, found.get("sha256"), item.sha256))
    return old, new, tuple(key)


class _Decisions:
    """What a host's configuration change needs, decided once for each distinct set of files (by
    their checksums); a configless host without files takes the primary controller's decision."""

    def __init__(self, version: str | None):
        self.version = version or ""
        self.by_files: dict[tuple, ConfChange] = {}
        self.primary: ConfChange | None = None

    def for_host(self, files: list[HostFile], rendered: dict[str, str], probe: HostProbe, primary: bool) -> ConfChange:
        old, new, key = _old_and_new(files, rendered, probe)
        if not new and self.primary is not None:
            return self.primary
        if key not in self.by_files:
            self.by_files[key], _ = host_conf_change(self.version, old, new)
        if primary:
            self.primary = self.by_files[key]
        return self.by_files[key]


def _daemon_changes(cluster: Cluster, host: str, files: list[HostFile], probe: HostProbe, change: ConfChange) -> list[Change]:
    reason = "; ".join(change.reasons)
    dbd_conf = next((item for item in files if item.name == "slurmdbd.conf"), None)
    dbd_changed = dbd_conf is not None and probe.files.get(dbd_conf.path, {}).get("sha256") != dbd_conf.sha256
    changes = []
    for daemon, facts in sorted(probe.daemons.items()):
        base = daemon.split("@", 1)[0]
        if not facts.get("running"):
            changes.append(Change(host, daemon, Impact.START, "not running: start"))
        elif _restarts(base, change):
            changes.append(Change(host, daemon, Impact(f"restart {base}"), reason))
        elif base == "slurmdbd" and dbd_changed:
            changes.append(Change(host, daemon, Impact.RESTART_SLURMDBD, "slurmdbd.conf changed"))
        elif base == "slurmctld" and change.reconfigure and host == cluster.inventory.controllers.primary:
            changes.append(Change(host, daemon, Impact.RECONFIGURE, reason))
    return changes


OWED_IMPACT = {"restart-slurmctld": Impact.RESTART_SLURMCTLD, "restart-slurmd": Impact.RESTART_SLURMD,
               "reconfigure": Impact.RECONFIGURE}


def _owed_and_stale(host: str, probe: HostProbe, found: list[Change]) -> list[Change]:
    """What an unfinished deploy left owed on the host, and slurmd instances no node of the
    inventory runs as (a removed node's slurmd still running)."""
    already = {(change.host, change.impact) for change in found}
    changes = [Change(host, marker, OWED_IMPACT[marker], "owed by an earlier deploy that did not finish")
               for marker in probe.owed if marker in OWED_IMPACT and (host, OWED_IMPACT[marker]) not in already]
    changes += [Change(host, daemon, Impact.STOP, f"runs, but no node of the inventory is {daemon.split('@')[1]}")
                for daemon in sorted(probe.slurmds) if daemon not in probe.daemons]
    return changes


def _retired(cluster: Cluster, record: DeployedRecord) -> list[Change]:
    """The slurmd instances of hosts that left the inventory: deploy reaches them as the record
    says and stops them (they are not probed: a machine taken out may well be gone)."""
    return [Change(host, f"slurmd@{node}", Impact.STOP, "its host left the inventory")
            for host, entry in record.retired(cluster.hosts).items() for node in entry["slurmd_nodes"]]


def _restarts(daemon: str, change: ConfChange) -> bool:
    return {"slurmctld": change.restart_slurmctld, "slurmd": change.restart_slurmd,
            "slurmdbd": change.restart_slurmdbd}.get(daemon, False)


def _node_changes(cluster: Cluster, controller: dict[str, Any], jobs: list[dict[str, str]]) -> list[Change]:
    known = {node["name"]: node for node in controller.get("nodes", [])}
    wanted = {node.name: node for node in cluster.nodes}
    changes = [Change(node.host, node.name, Impact.NODE_ADD, f"new node on {node.host}")
               for name, node in wanted.items() if name not in known]
    primary = cluster.inventory.controllers.primary
    job_nodes = [(job["id"], set(expand(job["nodes"])) if job["nodes"] else set()) for job in jobs]
    for name in sorted(set(known) - set(wanted)):
        running = [job for job, on in job_nodes if name in on]
        detail = f"state {known[name]['state']}; " + (
            f"running jobs {', '.join(running)}: drained first, removed when they end" if running else "no running jobs"
        )
        changes.append(Change(primary, name, Impact.NODE_REMOVE, detail))
    return changes
