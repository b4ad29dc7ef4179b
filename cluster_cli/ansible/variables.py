"""Role variables derived from the model: the only place the inventory meets the roles.

Every name here is declared in a role's meta/argument_specs.yml (a unit test checks it), so
the model and the roles cannot drift apart silently. Secrets go to a separate 0600 file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster_cli.site_directory import bind_password_path, read_bind_password
from cluster_cli.people_accounts import people_document
from cluster_cli.slurm_accounting import REMOVE_UNLISTED, accounting_document
from cluster_cli.cluster import Cluster
from cluster_cli.model import Nccl, PackageMirror
from cluster_cli.render import SLURM_BUILD_DIR
from cluster_cli.render.alertmanager_conf import ALERTMANAGER_CONFIG
from cluster_cli.render.health_conf import HEALTH_BUILD_DIR
from cluster_cli.render.job_templates import EXAMPLES_BUILD_DIR
from cluster_cli.render.monitoring import EXPORTER_BUILD_DIR, MONITORING_BUILD_DIR
from cluster_cli.render.sssd_conf import CA_FILE, SSSD_CONF
from cluster_cli.render.mount_units import STORAGE_BUILD_DIR, UNIT_MARKER, UNITS_DIR, fstab_line, unit_name
from cluster_cli.render.nfs_exports import EXPORTS_BUILD_PATH, EXPORTS_DIR, EXPORTS_FILE
from cluster_cli.shared_storage import (
    client_packages,
    exported_homes,
    exported_work_dirs,
    mount_group,
    SERVER_PORT,
    server_exports,
    shared_mounts,
)
from cluster_cli.shared_venv import sharing_hosts
from cluster_cli.containers import container_packages
from cluster_cli.mpi_launch import mpi_packages, training_pins
from cluster_cli.secrets_store import ClusterSecrets


def package_mirror_variables(mirror: PackageMirror | None) -> dict[str, Any]:
    """The common role's package source variables; the "no mirror" values (empty URI, no pip
    settings) leave every host's own sources as they are."""
    apt = mirror.apt if mirror else None
    pip = mirror.pip if mirror else None
    return {
        "common_package_mirror_apt_uri": apt.uri if apt else "",
        "common_package_mirror_apt_suites": list(apt.suites) if apt else ["./"],
        "common_package_mirror_apt_components": list(apt.components) if apt else [],
        "common_package_mirror_apt_trusted": apt.trusted if apt else False,
        "common_package_mirror_apt_signed_by": (apt.signed_by or "") if apt else "",
        "common_package_mirror_apt_exclusive": apt.exclusive if apt else True,
        "common_package_mirror_pip_index_url": (pip.index_url or "") if pip else "",
        "common_package_mirror_pip_find_links": list(pip.find_links) if pip else [],
        "common_package_mirror_pip_no_index": pip.no_index if pip else False,
    }


def conf_server(cluster: Cluster) -> str:
    """slurmd's ``--conf-server`` in configless mode: every controller as ``address:port``, the
    primary first (slurmd asks them in that order); empty where slurmd reads local files."""
    inventory = cluster.inventory
    if not inventory.slurm.configless:
        return ""
    controllers = inventory.controllers
    names = [controllers.primary] + ([controllers.backup] if controllers.backup else [])
    return ",".join(f"{cluster.hosts[name].address}:{controllers.port}" for name in names)


def nvml_plugin_variables(cluster: Cluster, build_dir: Path) -> dict[str, Any]:
    """slurm_build's variables: how the hosts that autodetect their GPUs get the NVML plugin (the
    play runs only on them, the slurm_nvml group)."""
    slurm = cluster.inventory.slurm
    build = slurm.build
    return {
        "slurm_build_from": slurm.nvml_plugin,
        "slurm_build_nvml": build.nvml,
        # the Debian version the cluster runs; empty: the build host's slurmd candidate
        "slurm_build_version": slurm.version or "",
        "slurm_build_build_host": build.host or cluster.inventory.controllers.primary,
        "slurm_build_fetch_dir": str(build_dir / SLURM_BUILD_DIR),
    }


def uses_infiniband(nccl: Nccl) -> bool:
    """NCCL is pointed at InfiniBand adapters and not told to avoid them."""
    return "NCCL_IB_HCA" in nccl.env and str(nccl.env.get("NCCL_IB_DISABLE", "0")) != "1"


def monitoring_variables(cluster: Cluster, build_dir: Path) -> dict[str, Any]:
    """The monitoring roles' variables (their plays run only where `monitoring.host` is set)."""
    monitoring = cluster.inventory.monitoring
    ports = monitoring.ports
    return {
        "node_exporter_port": ports.node,
        "slurm_exporter_src": str(build_dir / EXPORTER_BUILD_DIR),
        "slurm_exporter_port": ports.slurm,
        "slurm_exporter_accounting": cluster.inventory.accounting.enabled,
        "gpu_exporter_src": str(build_dir / EXPORTER_BUILD_DIR),
        "gpu_exporter_port": ports.gpu,
        "prometheus_config_src": str(build_dir / MONITORING_BUILD_DIR),
        "prometheus_port": ports.prometheus,
        "prometheus_retention": monitoring.retention,
        "prometheus_alertmanager": monitoring.alertmanager,
        "prometheus_alertmanager_port": ports.alertmanager,
        # Alertmanager's configuration with the inventory's receivers (a secret file); "": Debian's own
        "prometheus_alertmanager_config_src": (str(build_dir / ALERTMANAGER_CONFIG)
                                               if monitoring.alertmanager and monitoring.receivers else ""),
    }


def directory_variables(cluster: Cluster, build_dir: Path) -> dict[str, Any]:
    """roles/sssd's variables (its play runs only where `people.directory` is set); the bind
    password is a secret variable."""
    directory = cluster.inventory.people.directory
    has_ca = directory is not None and directory.ca_file is not None
    return {
        "sssd_conf_src": str(build_dir / SSSD_CONF),
        "sssd_ca_src": str(build_dir / CA_FILE) if has_ca else "",
        "sssd_local_users": [person.name for person in cluster.inventory.people.users if person.state != "absent"],
    }


def storage_variables(cluster: Cluster, build_dir: Path) -> dict[str, Any]:
    """roles/storage_client's variables: every mount, each with the Ansible group of the hosts that
    mount it (render/ansible_inventory), its units' names and its fstab line; and the shared ones for
    roles/common's people (a home on one is its file server's)."""
    storage = cluster.inventory.storage
    mounts = [
        {
            "path": mount.path,
            "hosts_group": mount_group(index),
            "unit": unit_name(mount),
            "automount_unit": unit_name(mount, "automount") if mount.automount else "",
            "packages": list(client_packages(mount)),
            "fstab": fstab_line(mount),
            "owner": mount.owner or "root",
            "group": mount.group or "root",
            "mode": mount.mode or "0755",
        }
        for index, mount in enumerate(storage.mounts if storage is not None else [])
    ]
    return {
        "common_people_shared_mounts": shared_mounts(cluster.inventory),
        "storage_client_mounts": mounts,
        "storage_client_units_src": str(build_dir / STORAGE_BUILD_DIR),
        "storage_client_units_dir": UNITS_DIR,
        "storage_client_marker": UNIT_MARKER,
    }


def nfs_server_variables(cluster: Cluster, build_dir: Path) -> dict[str, Any]:
    """roles/nfs_server's variables (its play runs only on storage.nfs_server's host): the exported
    directories, the rendered exports file, and the homes of the managed users and the test user's
    work directory inside an export, made on the server itself (root on a client is squashed and
    cannot give them to their users)."""
    storage = cluster.inventory.storage
    server = storage.nfs_server if storage is not None else None
    exports = server_exports(server) if server is not None else []
    exported = [export.path for export in exports]
    return {
        "nfs_server_exports": [{"path": export.path, "owner": export.owner or "root", "group": export.group or "root",
                                "mode": export.mode or "0755"} for export in exports],
        "nfs_server_exports_src": str(build_dir / EXPORTS_BUILD_PATH),
        "nfs_server_exports_file": f"{EXPORTS_DIR}/{EXPORTS_FILE}",
        "nfs_server_homes": exported_homes(people_document(cluster.inventory)["users"], exported),
        "nfs_server_work_dirs": exported_work_dirs(cluster.inventory, exported),
        "nfs_server_port": SERVER_PORT,
    }


def cluster_variables(cluster: Cluster, build_dir: Path, secrets: ClusterSecrets) -> dict[str, Any]:
    inventory = cluster.inventory
    slurm = inventory.slurm
    paths = slurm.paths
    accounting = inventory.accounting
    training = inventory.training
    config_src = str(build_dir / "slurm")
    variables: dict[str, Any] = {
        # common
        "common_slurm_user": slurm.user,
        "common_slurm_group": slurm.user,
        "common_slurm_uid": slurm.uid,
        "common_slurm_gid": slurm.gid,
        "common_munge_uid": inventory.munge.uid,
        "common_munge_gid": inventory.munge.gid,
        **{f"common_people_{kind}": entries for kind, entries in people_document(inventory).items()},
        "common_log_dir": paths.log_dir,
        "common_run_dir": paths.run_dir,
        **package_mirror_variables(inventory.package_mirror),
        # munge
        "munge_key_src": str(secrets.munge_key_path),
        # slurm_common
        "slurm_common_config_src": config_src,
        "slurm_common_conf_dir": paths.conf_dir,
        "slurm_common_version": slurm.version or "",
        "slurm_common_configless": slurm.configless,
        # slurmdbd
        "slurmdbd_port": accounting.port,
        "slurmdbd_storage_loc": accounting.database,
        "slurmdbd_storage_user": accounting.database_user,
        "slurmdbd_cluster_name": cluster.name,
        "slurmdbd_accounting": accounting_document(cluster),
        "slurmdbd_accounting_remove": REMOVE_UNLISTED,
        # slurmctld
        "slurmctld_port": inventory.controllers.port,
        "slurmctld_state_dir": paths.state_dir,
        # slurmd
        "slurmd_spool_dir": paths.spool_dir,
        "slurmd_conf_server": conf_server(cluster),
        "slurmd_mpi_packages": mpi_packages(inventory),
        "slurmd_container_packages": container_packages(inventory),
        "slurmd_containers": inventory.containers.enabled,
        # the document each host's file is made from (health_conf.HEALTH_DOCUMENT); empty: no health check
        "slurmd_health_config_src": str(build_dir / HEALTH_BUILD_DIR) if inventory.health_check.enabled else "",
        "slurmd_pam_adopt_allow": [
            *inventory.node_access.admin_users, *(f"({group})" for group in inventory.node_access.admin_groups)
        ],
        **nvml_plugin_variables(cluster, build_dir),
        # nccl (GPU hosts)
        "nccl_conf_src": str(build_dir / "nccl" / "nccl.conf"),
        "nccl_infiniband": uses_infiniband(inventory.nccl),
        # login
        "login_examples_src": str(build_dir / EXAMPLES_BUILD_DIR),
        "login_examples_dir": training.examples_dir,
        "login_mpi_packages": mpi_packages(inventory),
        "login_container_packages": container_packages(inventory),
        **monitoring_variables(cluster, build_dir),
        **directory_variables(cluster, build_dir),
        **storage_variables(cluster, build_dir),
        **nfs_server_variables(cluster, build_dir),
        # training_env
        "training_env_venv_path": training.venv_path,
        "training_env_shared_hosts": sharing_hosts(cluster),
        "training_env_python": training.python,
        "training_env_torch_version": training.torch_version or "",
        "training_env_ray_version": training.ray_version or "",
        "training_env_packages": training_pins(inventory),
        "training_env_pip_args": list(training.pip_args),
        "training_env_test_user": training.test_user,
        "training_env_test_user_uid": training.test_user_uid,
        "training_env_test_user_gid": training.test_user_gid,
        # The ids must agree between hosts (jobs run under the submitter's UID on other nodes); on
        # a cluster of one host an existing account with other ids can be kept (with a warning).
        "training_env_test_user_strict": len(cluster.hosts) > 1,
        "training_env_work_dir": training.work_dir,
    }
    return variables


def secret_variables(cluster: Cluster, secrets: ClusterSecrets) -> dict[str, Any]:
    variables: dict[str, Any] = {}
    if cluster.inventory.accounting.enabled:
        variables["slurmdbd_storage_pass"] = secrets.db_password()
    password_file = bind_password_path(cluster.inventory)
    if password_file is not None:
        variables["sssd_bind_password"] = read_bind_password(password_file)
    return variables
