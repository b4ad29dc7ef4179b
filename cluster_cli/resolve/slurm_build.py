"""Slurm built from source: what the build needs, and where the NVML plugin is built."""

from __future__ import annotations

from collections.abc import Mapping

from cluster_cli.model import Inventory
from cluster_cli.resolve.problems import Problems

#: The control node, as `slurm.build.host` names it (Ansible's implicit localhost).
CONTROL_NODE = "localhost"


def check_build(inventory: Inventory, hosts: Mapping[str, object], problems: Problems) -> None:
    slurm = inventory.slurm
    build = slurm.build
    if slurm.install == "build" and build.source == "tarball":
        if build.tarball_url is None:
            problems.add(("slurm", "build", "tarball_url"), "source: tarball needs tarball_url")
        if build.tarball_sha256 is None:
            problems.add(("slurm", "build", "tarball_sha256"), "source: tarball needs tarball_sha256")
    if not (inventory.autodetects_gpus() and slurm.nvml_plugin == "build"):
        return
    if build.source != "debian":
        # The daemons run Debian's binaries: a tarball's /opt/slurm plugin would not be loaded.
        problems.add(
            ("slurm", "build", "source"),
            "autodetect: nvml builds the plugin from Debian's source (source: debian); "
            "a tarball build is not wired into deploy",
        )
    if not build.nvml:
        problems.add(("slurm", "build", "nvml"), "autodetect: nvml needs the NVML plugin (nvml: true)")
    if build.host is not None and build.host != CONTROL_NODE and build.host not in hosts:
        problems.add(
            ("slurm", "build", "host"),
            f"host '{build.host}' is not a host of this cluster (or 'localhost', the control node)",
        )
