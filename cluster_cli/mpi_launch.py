"""Whether the cluster sets MPI up (`mpi.enabled`, or its default), and what that puts where.

The one home of its rules: slurm.conf's MpiDefault and TmpFS, the packages and mpi4py the roles
install, the bundle, the series check of the plugin and the smoke suite's target all ask here.
"""

from __future__ import annotations

from cluster_cli import hostlist
from cluster_cli.model import Inventory
from cluster_cli.slurm_facts import has_facts, shipped_plugins

# What Slurm's MPI plugins need on a host that runs srun or slurmd, on both Debian releases.
# Debian 12's mpi_pmix_v4.so opens pmix2/lib/libpmix.so, which only libpmix-dev ships (the plugin
# package does not depend on it: "can not load PMIx library" on every step); Debian 13's
# mpi_pmix_v5.so opens libpmix.so.2, which its package already pulls in, and libpmix-dev costs it
# only headers. One list for both, as no role knows the release before it installs Slurm.
# Debian's Open MPI (4.1 and 5.0) is built with PMIx and without Slurm's PMI-2: srun starts it
# with --mpi=pmix only.
MPI_PACKAGES = ("libpmix-dev", "openmpi-bin")
# The hosts that get them: where srun runs (login) and slurmd starts the ranks (compute); the roles
# slurmd and login install them (slurmd_mpi_packages, login_mpi_packages).
MPI_ROLES = frozenset({"compute", "login"})


def mpi_enabled(inventory: Inventory) -> bool:
    """`mpi.enabled`; unset: whether GPU nodes run on more than one host."""
    wanted = inventory.mpi.enabled
    if wanted is not None:
        return wanted
    gpu_hosts: set[str] = set()
    for group in inventory.node_groups:
        if group.gpus is not None:
            gpu_hosts.update([group.host] if group.host else hostlist.expand(group.nodes))
        if len(gpu_hosts) > 1:
            return True
    return False


def mpi_plugin(inventory: Inventory) -> str:
    """`mpi.plugin`; unset: pmix, or pmi2 where `slurm.version` pins a series whose packages ship no
    mpi/pmix plugin (slurm_facts: Debian's 26.05 ships pmi2 only)."""
    if inventory.mpi.plugin is not None:
        return inventory.mpi.plugin
    version = inventory.slurm.version
    if version is not None and has_facts(version) and "pmix" not in shipped_plugins(version).get("mpi", ()):
        return "pmi2"
    return "pmix"


def mpi_packages(inventory: Inventory) -> list[str]:
    """The Debian packages login and compute hosts get for MPI (none with MPI off)."""
    return list(MPI_PACKAGES) if mpi_enabled(inventory) else []


def training_pins(inventory: Inventory) -> list[str]:
    """`training.packages`, and mpi4py where MPI is on and they pin no mpi4py of their own."""
    pins = list(inventory.training.packages)
    version = inventory.mpi.mpi4py_version
    if mpi_enabled(inventory) and version and not any(_pinned_name(pin) == "mpi4py" for pin in pins):
        pins.append(f"mpi4py=={version}")
    return pins


def installs_mpi4py(inventory: Inventory) -> bool:
    """The training environment gets mpi4py (ours, or the site's own pin)."""
    return any(_pinned_name(pin) == "mpi4py" for pin in training_pins(inventory))


def _pinned_name(pin: str) -> str:
    return pin.split("==", 1)[0].strip().lower().replace("_", "-")

