"""Which Debian packages and wheels a deploy of this cluster installs.

The package names are the roles' own defaults (roles/*/defaults/main.yml), read here, so the
bundle and the roles cannot drift; which roles a cluster runs comes from its resolved hosts.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

from cluster_cli.cluster import Cluster
from cluster_cli.errors import ClusterCliError
from cluster_cli.paths import project_root
from cluster_cli.render.ansible_inventory import pam_adopt_node

#: The NVML plugin package roles/slurm_build makes (Debian's Slurm has no gpu/nvml plugin).
NVML_PLUGIN_PACKAGE = "slurm-wlm-nvml-plugin"
#: What Ansible's modules need on a managed host (the apt module runs on python3-apt).
ANSIBLE_HOST_PACKAGES = ("python3", "python3-apt")

# (role, variable): the packages of each host role, as the roles install them
EVERY_HOST = (("slurm_common", "slurm_common_packages"), ("munge", "munge_packages"))
OF_ROLE = {
    "controller": (("slurmctld", "slurmctld_packages"),),
    "compute": (("slurmd", "slurmd_packages"), ("training_env", "training_env_system_packages")),
    "database": (("slurmdbd", "slurmdbd_packages"), ("slurmdbd", "slurmdbd_mariadb_packages")),
    "login": (("login", "login_packages"), ("training_env", "training_env_system_packages")),
}
PAM_ADOPT_PACKAGE = "libpam-slurm-adopt"  # roles/slurmd/vars/main.yml: where slurmd_pam_adopt_node is set
INFINIBAND = ("nccl", "nccl_ib_packages")


@cache
def role_default(role: str, variable: str) -> tuple[str, ...]:
    """A list variable of roles/ROLE/defaults/main.yml."""
    root = project_root()
    if root is None:
        raise ClusterCliError("cannot find roles/ (reinstall cluster-cli or set CLUSTER_CLI_PROJECT_DIR)")
    path = Path(root) / "roles" / role / "defaults" / "main.yml"
    value = (yaml.safe_load(path.read_text()) or {}).get(variable)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ClusterCliError(f"{path}: {variable} is not a list of package names")
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
    for role, variable in sources:
        wanted.update(role_default(role, variable))
    if any(pam_adopt_node(cluster, host) for host in cluster.hosts.values()):
        wanted.add(PAM_ADOPT_PACKAGE)
    return sorted(wanted)


def pip_requirements(cluster: Cluster) -> list[str]:
    """What roles/training_env pip-installs into the training environment: torch and the pins."""
    training = cluster.inventory.training
    pins = [f"torch=={training.torch_version}"] if training.torch_version else []
    return pins + list(training.packages)
