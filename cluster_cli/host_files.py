"""Which rendered file each host receives, and where: what the roles copy, for `plan` to compare.

The roles copy byte for byte (roles/slurm_common: the Slurm configs to every cluster host;
roles/slurmdbd: slurmdbd.conf to the database host; roles/munge: the key to every host;
roles/slurmd: the health check's file to each compute host; roles/login: the job templates to
each login host; roles/prometheus, roles/slurm_exporter and roles/gpu_exporter: their files to the monitoring
host, the primary controller and the hosts whose GPUs NVML reads; roles/sssd: sssd.conf and the
directory's CA to every host), so a
host's file matches when its checksum equals the rendered one. A deploy followed by a plan
that finds nothing to change (tests/deploy) keeps this table true to the roles.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from cluster_cli.cluster import Cluster, ManagedHost
from cluster_cli.containers import OCI_RUN_PROGRAM
from cluster_cli.paths import project_dir
from cluster_cli.render.alertmanager_conf import ALERTMANAGER_CONFIG
from cluster_cli.render.health_conf import HEALTH_CONFIG_PATH, HEALTH_PROGRAM_PATH, host_health_path
from cluster_cli.render.job_templates import EXAMPLES_BUILD_DIR
from cluster_cli.render.monitoring import (
    ALERT_RULES, EXPORTER_BUILD_DIR, EXPORTER_DIR, MONITORING_BUILD_DIR, PROMETHEUS_CONFIG, PROMETHEUS_DIR,
)
from cluster_cli.render.sssd_conf import CA_FILE, HOST_CA_PATH, SSSD_CONF, SSSD_CONF_PATH
from cluster_cli.render.mount_units import STORAGE_BUILD_DIR, UNITS_DIR, unit_name
from cluster_cli.render.nfs_exports import EXPORTS_BUILD_PATH, EXPORTS_DIR, EXPORTS_FILE
from cluster_cli.shared_storage import mounts_by_host

MUNGE_KEY_PATH = "/etc/munge/munge.key"
# Where the roles leave the restarts and reconfigures a change still owes (slurm_common_pending_dir's
# default; tests/unit/test_plan.py holds the two together).
PENDING_DIR = "/var/lib/slurm/pending"
# What the munge and slurmdbd roles leave once they installed the cluster's key and slurmdbd.conf
# (roles/munge/vars/main.yml, roles/slurmdbd/vars/main.yml; tests/unit/test_ownership.py holds them
# together): ownership's evidence that a host's secrets are a cluster-cli cluster's.
MUNGE_KEY_MARKER = "/var/lib/slurm/munge-key-installed-by-cluster-cli"
SLURMDBD_CONF_MARKER = "/var/lib/slurm/slurmdbd-conf-installed-by-cluster-cli"
# Rendered files (build directory paths) every cluster host holds in the Slurm config directory.
SLURM_CONFIGS = ("slurm/slurm.conf", "slurm/gres.conf", "slurm/cgroup.conf", "slurm/topology.conf", "slurm/oci.conf")
# Configless: the hosts that keep those files (roles/slurm_common's __slurm_common_file_groups);
# a host that only runs slurmd fetches them from slurmctld and must not hold them.
CONFIGLESS_FILE_ROLES = frozenset({"controller", "login", "database"})
# roles/slurmd's programs on compute hosts, by their files in the role: the health check, the container
# start (the sources are these role paths, not rendered files: role_program_checksums).
SLURMD_PROGRAMS = {
    HEALTH_PROGRAM_PATH: "roles/slurmd/files/cluster-cli-health",
    OCI_RUN_PROGRAM: "roles/slurmd/files/cluster-cli-oci-run",
}
EXAMPLES_PREFIX = f"{EXAMPLES_BUILD_DIR}/"
EXPORTER_PREFIX = f"{EXPORTER_BUILD_DIR}/"
CONSOLES_PREFIX = f"{MONITORING_BUILD_DIR}/consoles/"


@dataclass(frozen=True)
class HostFile:
    """A file a host should hold: its path there, the rendered file it comes from, its checksum."""

    path: str
    source: str  # the build directory path, BUNDLE:HOST (host_health_path), or "munge.key"
    sha256: str | None  # None: the host must not have it (an optional file the cluster dropped)
    secret: bool = False

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def files_for_host(
    cluster: Cluster, host: ManagedHost, checksums: dict[str, str], munge_key_sha256: str, mounts: Sequence[int] = (),
) -> list[HostFile]:
    """``checksums`` maps build directory paths (and host_health_path's names) to the sha256 of their text;
    ``mounts``: the host's mounts (shared_storage.mounts_by_host)."""
    conf_dir = cluster.inventory.slurm.paths.conf_dir
    keeps_files = not cluster.inventory.slurm.configless or bool(host.roles & CONFIGLESS_FILE_ROLES)
    files = []
    for source in SLURM_CONFIGS:
        sha256 = checksums.get(source) if keeps_files else None
        files.append(HostFile(f"{conf_dir}/{source.split('/')[1]}", source, sha256))
    if "database" in host.roles and "slurm/slurmdbd.conf" in checksums:
        files.append(HostFile(f"{conf_dir}/slurmdbd.conf", "slurm/slurmdbd.conf", checksums["slurm/slurmdbd.conf"],
                              secret=True))
    if host.slurmd_nodes:
        # roles/slurmd: the health check's expectations (none, and removed, when the check is off)
        source = host_health_path(host.name)
        files.append(HostFile(HEALTH_CONFIG_PATH, source, checksums.get(source)))
        # and its programs, each byte for byte its file of the role (none, and removed, when off)
        files += [HostFile(path, source, checksums.get(source)) for path, source in SLURMD_PROGRAMS.items()]
    if "login" in host.roles:
        # roles/login: the job templates and the user guide
        examples_dir = cluster.inventory.training.examples_dir
        files += [HostFile(f"{examples_dir}/{source.removeprefix(EXAMPLES_PREFIX)}", source, sha256)
                  for source, sha256 in checksums.items() if source.startswith(EXAMPLES_PREFIX)]
    files += _monitoring_files(cluster, host, checksums)
    if cluster.inventory.people.directory is not None:
        files.append(HostFile(SSSD_CONF_PATH, SSSD_CONF, checksums.get(SSSD_CONF)))
        if CA_FILE in checksums:
            files.append(HostFile(HOST_CA_PATH, CA_FILE, checksums[CA_FILE]))
    files += _mount_unit_files(cluster, mounts, checksums)
    if EXPORTS_BUILD_PATH in checksums and _is_nfs_server(cluster, host):
        # roles/nfs_server: the exports file on the server
        files.append(HostFile(f"{EXPORTS_DIR}/{EXPORTS_FILE}", EXPORTS_BUILD_PATH, checksums[EXPORTS_BUILD_PATH]))
    files.append(HostFile(MUNGE_KEY_PATH, "munge.key", munge_key_sha256, secret=True))
    return files


def _is_nfs_server(cluster: Cluster, host: ManagedHost) -> bool:
    storage = cluster.inventory.storage
    return storage is not None and storage.nfs_server is not None and storage.nfs_server.host == host.name


def _mount_unit_files(cluster: Cluster, mounts: Sequence[int], checksums: dict[str, str]) -> list[HostFile]:
    """roles/storage_client: the units of the host's mounts (written on a host without systemd too,
    where they are inert: it mounts from its fstab block, which plan does not compare)."""
    storage = cluster.inventory.storage
    if storage is None:
        return []
    files = []
    for mount in (storage.mounts[index] for index in mounts):
        for kind in ("mount", "automount") if mount.automount else ("mount",):
            source = f"{STORAGE_BUILD_DIR}/{unit_name(mount, kind)}"
            files.append(HostFile(f"{UNITS_DIR}/{unit_name(mount, kind)}", source, checksums.get(source)))
    return files


def _monitoring_files(cluster: Cluster, host: ManagedHost, checksums: dict[str, str]) -> list[HostFile]:
    """roles/prometheus: its configuration, the alert rules, the console pages and Alertmanager's
    configuration (a secret: the webhook URLs) on the monitoring host; roles/slurm_exporter and roles/gpu_exporter: the exporters' modules on the primary
    controller and on each host whose GPUs NVML reads."""
    if cluster.inventory.monitoring.host is None:
        return []
    files = []
    if "monitoring" in host.roles:
        for name in (PROMETHEUS_CONFIG, ALERT_RULES):
            source = f"{MONITORING_BUILD_DIR}/{name}"
            files.append(HostFile(f"{PROMETHEUS_DIR}/{name}", source, checksums.get(source)))
        files += [HostFile(f"{PROMETHEUS_DIR}/consoles/{source.removeprefix(CONSOLES_PREFIX)}", source, sha256)
                  for source, sha256 in checksums.items() if source.startswith(CONSOLES_PREFIX)]
        if ALERTMANAGER_CONFIG in checksums:  # with receivers only; else Debian's file is the site's
            files.append(HostFile(f"{PROMETHEUS_DIR}/alertmanager.yml", ALERTMANAGER_CONFIG, checksums[ALERTMANAGER_CONFIG],
                                  secret=True))
    if host.name == cluster.inventory.controllers.primary or host.has_nvml_gpus:
        files += [HostFile(f"{EXPORTER_DIR}/{source.removeprefix(EXPORTER_PREFIX)}", source, sha256)
                  for source, sha256 in checksums.items() if source.startswith(EXPORTER_PREFIX)]
    return files


def files_by_host(cluster: Cluster, rendered: dict[str, str], munge_key: bytes) -> dict[str, list[HostFile]]:
    """``rendered`` maps build directory paths to their text, with each host's health text taken out
    of its bundle (health_conf.with_host_health_texts); each is hashed once, not per host."""
    checksums = {path: sha256_text(text) for path, text in rendered.items() if text}
    checksums |= role_program_checksums(cluster)
    munge_key_sha256 = hashlib.sha256(munge_key).hexdigest()
    mounts = mounts_by_host(cluster.inventory, cluster.hosts)
    return {name: files_for_host(cluster, host, checksums, munge_key_sha256, mounts[name])
            for name, host in cluster.hosts.items()}


def role_program_checksums(cluster: Cluster) -> dict[str, str]:
    """The checksums of roles/slurmd's programs the inventory turns on, by their role paths."""
    wanted = {HEALTH_PROGRAM_PATH: cluster.inventory.health_check.enabled,
              OCI_RUN_PROGRAM: cluster.inventory.containers.enabled}
    project = project_dir()
    return {source: hashlib.sha256((project / source).read_bytes()).hexdigest()
            for path, source in SLURMD_PROGRAMS.items() if wanted[path]}
