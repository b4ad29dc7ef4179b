"""Which Debian packages and wheels a deploy of this cluster installs.

The package names are the roles' own defaults (roles/*/defaults/main.yml), read here, so the
bundle and the roles cannot drift; which roles a cluster runs comes from its resolved hosts.
"""

from __future__ import annotations

from cluster_cli.cluster import Cluster
from cluster_cli.errors import ClusterCliError
from cluster_cli.paths import project_dir
from cluster_cli.render.ansible_inventory import pam_adopt_node
from cluster_cli.containers import container_packages
from cluster_cli.mpi_launch import mpi_packages, training_pins
from cluster_cli.shared_storage import all_storage_packages
from cluster_cli.role_defaults import RoleDefaultError, role_default

#: The NVML plugin package roles/slurm_build makes (Debian's Slurm has no gpu/nvml plugin).
NVML_PLUGIN_PACKAGE = "slurm-wlm-nvml-plugin"
#: What Ansible's modules need on a managed host (the apt module runs on python3-apt).
ANSIBLE_HOST_PACKAGES = ("python3", "python3-apt")

# the role variables that list the packages of each host role, as the roles install them
EVERY_HOST = ("slurm_common_packages", "munge_packages")
OF_ROLE = {
    "controller": ("slurmctld_packages",),
    "compute": ("slurmd_packages", "training_env_system_packages"),
    "database": ("slurmdbd_packages", "slurmdbd_mariadb_packages"),
    "login": ("login_packages", "training_env_system_packages"),
    "monitoring": ("prometheus_packages",),
}
# with a monitoring host: node_exporter on every host, Alertmanager where the inventory asks for it
MONITORED_HOST = "node_exporter_packages"
ALERTMANAGER = "prometheus_alertmanager_packages"
# with a monitoring host and GPUs NVML reads: the GPU exporter's environment and its NVML binding
GPU_EXPORTER = "gpu_exporter_packages"
GPU_EXPORTER_WHEELS = "gpu_exporter_pip_packages"
# with a directory (people.directory): SSSD on every host
DIRECTORY_CLIENT = "sssd_packages"
PAM_ADOPT_PACKAGE = "libpam-slurm-adopt"  # roles/slurmd/vars/main.yml: where slurmd_pam_adopt_node is set
INFINIBAND = "nccl_ib_packages"


def package_list(variable: str) -> tuple[str, ...]:
    """A list variable of its role's defaults (roles/ROLE/defaults/main.yml)."""
    root = project_dir()
    try:
        value = role_default(variable, root / "roles")
    except RoleDefaultError as error:
        raise ClusterCliError(str(error)) from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ClusterCliError(f"{root / 'roles'}: {variable} is not a list of package names")
    return tuple(value)


def debian_packages(cluster: Cluster, infiniband: bool = False) -> list[str]:
    """The archive packages a deploy of ``cluster`` installs on its hosts (the NVML plugin is not
    one: it is built, see bundle.nvml_plugin)."""
    wanted = set(ANSIBLE_HOST_PACKAGES)
    sources = set(EVERY_HOST)
    for host in cluster.hosts.values():
        for role in host.roles:
            sources.update(OF_ROLE.get(role, ()))
    if infiniband:
        sources.add(INFINIBAND)
    if cluster.inventory.people.directory is not None:
        sources.add(DIRECTORY_CLIENT)
    monitoring = cluster.inventory.monitoring
    if monitoring.host is not None:
        sources.add(MONITORED_HOST)
        if monitoring.alertmanager:
            sources.add(ALERTMANAGER)
        if _exports_gpus(cluster):
            sources.add(GPU_EXPORTER)
    for variable in sources:
        wanted.update(package_list(variable))
    if any(pam_adopt_node(cluster, host) for host in cluster.hosts.values()):
        wanted.add(PAM_ADOPT_PACKAGE)
    wanted.update(mpi_packages(cluster.inventory))
    wanted.update(container_packages(cluster.inventory))
    wanted.update(all_storage_packages(cluster.inventory))
    return sorted(wanted)


def pip_requirements(cluster: Cluster) -> list[str]:
    """What pip installs on the hosts: torch, Ray and the pins in the training environment
    (roles/training_env), NVML's binding in the GPU exporter's (roles/gpu_exporter)."""
    training = cluster.inventory.training
    pins = [f"torch=={training.torch_version}"] if training.torch_version else []
    pins += [f"ray=={training.ray_version}"] if training.ray_version else []
    pins += training_pins(cluster.inventory)
    return pins + (list(package_list(GPU_EXPORTER_WHEELS)) if _exports_gpus(cluster) else [])


def _exports_gpus(cluster: Cluster) -> bool:
    """roles/gpu_exporter runs somewhere: a monitoring host, and GPUs NVML reads."""
    return cluster.inventory.monitoring.host is not None and any(host.has_nvml_gpus for host in cluster.hosts.values())
