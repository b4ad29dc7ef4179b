"""Ask every host what it runs now, one fast probe per host, all hosts at once.

The host side is ``probe/agent.py`` (standard library only): run in-process for a host whose
connection is local, otherwise its source goes to the host's Python over SSH. Which files a
host should hold comes from ``host_files``; a host that cannot be probed is reported with the
reason, never guessed.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_cli.cluster import Cluster, ManagedHost
from cluster_cli.containers import container_images, container_packages
from cluster_cli.host_files import PENDING_DIR, HostFile
from cluster_cli.probe import agent
from cluster_cli.resolve.clashes import host_daemons
from cluster_cli.slurm_associations import read_commands
from cluster_cli.ssh import ssh_argv
from cluster_cli.render.mount_units import UNIT_MARKER, UNITS_DIR, unescape_path
from cluster_cli.shared_storage import all_storage_packages

AGENT_SOURCE = Path(agent.__file__).read_text(encoding="utf-8")
PROBE_TIMEOUT_S = 60
MAX_PARALLEL_PROBES = 64
# Debian packages whose installed versions a plan compares.
PROBED_PACKAGES = ("slurm-client", "slurmctld", "slurmd", "slurmdbd", "munge")
# The monitoring roles' daemons' packages (roles/node_exporter, roles/prometheus), probed where the
# inventory has a monitoring host.
MONITORING_PACKAGES = ("prometheus-node-exporter", "prometheus", "prometheus-alertmanager")
# roles/sssd's LDAP provider, probed where the inventory has a directory.
DIRECTORY_PROBED_PACKAGE = "sssd-ldap"


@dataclass(frozen=True)
class HostProbe:
    """What one host answered, or why it could not answer (``error``)."""

    host: str
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    daemons: dict[str, dict[str, Any]] = field(default_factory=dict)
    packages: dict[str, str | None] = field(default_factory=dict)
    controller: dict[str, Any] | None = None
    error: str | None = None
    owed: list[str] = field(default_factory=list)
    slurmds: dict[str, dict[str, Any]] = field(default_factory=dict)
    ports: dict[str, bool] = field(default_factory=dict)
    owner: dict[str, Any] | None = None
    # slurmdbd's accounting data (on the accounting host): {"outputs": {command: text}, "error": ...}
    accounting: dict[str, Any] | None = None
    # cluster-cli's mount units the inventory no longer has: [{"unit", "path", "mounted", "users"}]
    stale_mounts: list[dict[str, Any]] = field(default_factory=list)
    # the host's own mount points that nothing is mounted on
    unmounted: list[str] = field(default_factory=list)
    # each container image asked for: whether the host holds a root filesystem there
    images: dict[str, bool] = field(default_factory=dict)


def daemon_pidfiles(cluster: Cluster, host: ManagedHost) -> dict[str, str]:
    """Each daemon the host should run and its pid file (the paths slurm.conf and slurmdbd.conf set);
    empty for one found by what runs it (MariaDB and the monitoring daemons: their packages'
    services and their units write their own, or none)."""
    run_dir = cluster.inventory.slurm.paths.run_dir
    pidfiles = {}
    if host.name in controller_hosts(cluster):
        pidfiles["slurmctld"] = f"{run_dir}/slurmctld.pid"
    if "database" in host.roles:
        pidfiles["slurmdbd"] = f"{run_dir}/slurmdbd.pid"
    for node in host.slurmd_nodes:
        pidfiles[f"slurmd@{node.name}"] = f"{run_dir}/slurmd-{node.name}.pid"
    pidfiles.update({claim.daemon: "" for claim in host_daemons(cluster.inventory, host) if claim.daemon not in pidfiles})
    return pidfiles


def daemon_programs(cluster: Cluster, host: ManagedHost) -> dict[str, str]:
    """The daemons of ``host`` that no program of their name runs, and what does (a Python module)."""
    return {claim.daemon: claim.program for claim in host_daemons(cluster.inventory, host) if claim.program}


def controller_hosts(cluster: Cluster) -> list[str]:
    """The primary controller, then the backup if any."""
    controllers = cluster.inventory.controllers
    return [name for name in (controllers.primary, controllers.backup) if name]


def probe_request(
    cluster: Cluster, host: ManagedHost, files: list[HostFile], owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``owner``: the ownership evidence to ask for too (ownership.owner_request)."""
    paths = cluster.inventory.slurm.paths
    is_primary = host.name == cluster.inventory.controllers.primary
    return {
        "files": [{"path": item.path, "want": item.sha256, "secret": item.secret} for item in files],
        "pidfiles": daemon_pidfiles(cluster, host),
        "programs": daemon_programs(cluster, host),
        "packages": list(PROBED_PACKAGES) + (list(MONITORING_PACKAGES) if cluster.inventory.monitoring.host else [])
        + cluster.mpi_packages + container_packages(cluster.inventory)
        + ([DIRECTORY_PROBED_PACKAGE] if cluster.inventory.people.directory else [])
        + all_storage_packages(cluster.inventory),
        "pending_dir": PENDING_DIR,
        "run_dir": paths.run_dir,
        "controller": {"conf": f"{paths.conf_dir}/slurm.conf", "state_dir": paths.state_dir} if is_primary else None,
        "owner": owner,
        "accounting": accounting_request(cluster) if host.name == accounting_host(cluster) else None,
        "mounts": mounts_request(files) if cluster.inventory.storage is not None else None,
        "images": container_images(cluster.inventory, host.roles),
    }


def mounts_request(files: list[HostFile]) -> dict[str, Any]:
    """Which of cluster-cli's mount units the host holds beyond ``files`` (its wanted ones), whether
    anything uses their mounts, and which of its own mounts are not mounted (plan's mount rows)."""
    wanted = [item.name for item in files if item.path.startswith(f"{UNITS_DIR}/") and item.sha256]
    paths = [unescape_path(name.removesuffix(".mount")) for name in wanted if name.endswith(".mount")]
    return {"units_dir": UNITS_DIR, "marker": UNIT_MARKER, "wanted": wanted, "wanted_paths": paths}


def accounting_host(cluster: Cluster) -> str | None:
    """The host slurmdbd runs on, where `plan` reads the accounting data; None without accounting."""
    accounting = cluster.inventory.accounting
    return accounting.host if accounting.enabled else None


def accounting_request(cluster: Cluster) -> dict[str, Any]:
    """The `sacctmgr show` commands whose output plan compares with the inventory's accounting data."""
    return {"conf": f"{cluster.inventory.slurm.paths.conf_dir}/slurm.conf",
            "commands": read_commands(cluster.name)}


def daemon_request(cluster: Cluster, host: ManagedHost) -> dict[str, Any]:
    """A probe of the daemons ``host`` should run, their processes and ports, and nothing else."""
    ports = {claim.daemon: [claim.address, claim.port] for claim in host_daemons(cluster.inventory, host)}
    return {"pidfiles": daemon_pidfiles(cluster, host), "programs": daemon_programs(cluster, host), "ports": ports}


def probe_host(host: ManagedHost, request: dict[str, Any]) -> HostProbe:
    try:
        answer = agent.probe(request) if host.connection == "local" else _probe_over_ssh(host, request)
    except ProbeFailed as failure:
        return HostProbe(host.name, error=str(failure))
    return HostProbe(
        host.name, answer["files"], answer["daemons"], answer["packages"], answer.get("controller"),
        owed=answer.get("owed", []), slurmds=answer.get("slurmds", {}), ports=answer.get("ports", {}),
        owner=answer.get("owner"), accounting=answer.get("accounting"),
        stale_mounts=(answer.get("mounts") or {}).get("stale", []),
        unmounted=(answer.get("mounts") or {}).get("unmounted", []),
        images=answer.get("images", {}),
    )


class ProbeFailed(Exception):
    pass


def _probe_over_ssh(host: ManagedHost, request: dict[str, Any]) -> dict[str, Any]:
    argv = ssh_argv(host, [host.python, "-", json.dumps(request, sort_keys=True)], options=["ConnectTimeout=10"])
    try:
        done = subprocess.run(argv, input=AGENT_SOURCE, capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ProbeFailed(f"no answer over SSH in {PROBE_TIMEOUT_S} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"ssh exited {done.returncode}"])[-1]
        raise ProbeFailed(f"ssh {host.ssh.user}@{host.address}: {last}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        raise ProbeFailed(f"the probe's answer is not JSON: {done.stdout[:200]!r}") from None


def probe_cluster(
    cluster: Cluster, files_by_host: dict[str, list[HostFile]],
    owner_requests: dict[str, dict[str, Any]] | None = None,
) -> dict[str, HostProbe]:
    """Probe every host of the cluster in parallel (with ``owner_requests``: each host's ownership
    evidence too)."""
    owners = owner_requests or {}
    requests = {name: probe_request(cluster, host, files_by_host.get(name, []), owners.get(name))
                for name, host in cluster.hosts.items()}
    return probe_hosts(cluster, requests)


def probe_daemons(cluster: Cluster) -> dict[str, HostProbe]:
    """Probe every host's daemons (processes and ports) in parallel."""
    return probe_hosts(cluster, {name: daemon_request(cluster, host) for name, host in cluster.hosts.items()})


def probe_hosts(cluster: Cluster, requests: dict[str, dict[str, Any]]) -> dict[str, HostProbe]:
    """Send each host its request, all at once."""
    workers = max(1, min(MAX_PARALLEL_PROBES, len(requests)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(probe_host, cluster.hosts[name], request) for name, request in requests.items()}
        return {name: future.result() for name, future in futures.items()}
