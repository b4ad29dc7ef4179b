"""Slurm's NVML plugin built from source: what the build needs, and where it is built."""

from __future__ import annotations

from collections.abc import Mapping

from cluster_cli.model import Inventory
from cluster_cli.resolve.problems import Problems

#: The control node, as `slurm.build.host` names it (Ansible's implicit localhost).
CONTROL_NODE = "localhost"


def check_build(inventory: Inventory, hosts: Mapping[str, object], problems: Problems) -> None:
    slurm = inventory.slurm
    build = slurm.build
    if not (inventory.autodetects_gpus() and slurm.nvml_plugin == "build"):
        return
    if not build.nvml:
        problems.add(("slurm", "build", "nvml"), "autodetect: nvml needs the NVML plugin (nvml: true)")
    if build.host is not None and build.host != CONTROL_NODE and build.host not in hosts:
        problems.add(
            ("slurm", "build", "host"),
            f"host '{build.host}' is not a host of this cluster (or 'localhost', the control node)",
        )
