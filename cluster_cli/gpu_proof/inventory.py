"""The proof's inventory, written from the machine's facts and rendered by cluster-cli's own code.

The inventory is a one-host cluster named after the machine: controller and node on it, no
accounting, no health check (nothing here installs one), every directory inside the run's work
directory and the kit's programs and plugins through ``slurm.conf`` keys. It is JSON, which YAML
reads, so that writing it needs nothing beyond the standard library.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from typing import Any

from cluster_cli.gpu_proof.daemons import Layout
from cluster_cli.gpu_proof.machine import Cpus

#: Ports away from a Slurm the machine may already run (6817-6819).
CTLD_PORT, SLURMD_PORT = 26817, 26818
#: What the proof imports beyond the standard library: the renderer's needs and NVML's binding.
KIT_MODULES = ("pydantic", "yaml", "click", "jinja2", "rich", "pynvml")


def use_wheels(wheels: Path, site: Path) -> list[str]:
    """Unpack into ``site`` (first on sys.path) the kit's wheels when this Python lacks one of
    KIT_MODULES; the wheels of other Python versions are left alone. Returns what was unpacked."""
    import importlib.util

    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    missing = [name for name in KIT_MODULES if importlib.util.find_spec(name) is None]
    if not missing:
        return []
    unpacked = []
    for wheel in sorted(wheels.glob("*.whl")):
        parts = wheel.name.split("-")
        if len(parts) >= 5 and parts[2] not in ("py3", "py2.py3", tag) and not parts[2].startswith(tag):
            continue  # a compiled wheel for another Python
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
        unpacked.append(wheel.name)
    sys.path.insert(0, str(site))
    return unpacked


def inventory(node: str, layout: Layout, cpus: Cpus, gpu_count: int, gpu_type: str,
              torch_version: str | None, cgroups: bool, swap_accounting: bool) -> dict[str, Any]:
    work = layout.work
    gpus: dict[str, Any] = {"count": gpu_count, "type": gpu_type, "autodetect": "nvml"}
    conf: dict[str, Any] = {
        "PluginDir": str(layout.kit_root / "lib" / "slurm"),
        "AuthInfo": f"socket={layout.munge_socket}",
        "SlurmdDebug": "debug2",  # the gpu/nvml plugin's per-GPU lines (autodetect)
        "SlurmctldDebug": "verbose",
    }
    cgroup_overrides: dict[str, Any] = {"IgnoreSystemd": "yes", "CgroupAutomount": "yes"}
    if not swap_accounting:  # task/cgroup refuses to start with it where the kernel has none
        cgroup_overrides["ConstrainSwapSpace"] = "no"
    if not cgroups:
        conf.update(ProctrackType="proctrack/linuxproc", TaskPlugin="task/affinity",
                    JobAcctGatherType="jobacct_gather/linux", PrologFlags=None)
        cgroup_overrides.update(ConstrainCores="no", ConstrainDevices="no", ConstrainRAMSpace="no",
                                ConstrainSwapSpace="no")
    return {
        "cluster_name": "gpu-proof",
        "hosts": [{"name": node, "connection": "local"}],
        "controllers": {"primary": node, "port": CTLD_PORT},
        "accounting": {"enabled": False},
        "node_groups": [{
            "name": "gpu", "nodes": node, "sockets": cpus.sockets, "cores_per_socket": cpus.cores_per_socket,
            "threads_per_core": cpus.threads_per_core, "real_memory_mb": cpus.real_memory_mb, "gpus": gpus,
        }],
        "partitions": [{"name": "gpu", "nodes": ["gpu"], "default": True, "max_time": "01:00:00"}],
        "health_check": {"enabled": False},
        "cgroup": {"version": "v2" if cgroups else "auto", "overrides": cgroup_overrides},
        "slurm": {
            "user": "root",
            "slurmd_port": SLURMD_PORT,
            "paths": {"conf_dir": str(layout.conf_dir), "state_dir": str(work / "state"),
                      "spool_dir": str(work / "spool"), "log_dir": str(layout.log_dir),
                      "run_dir": str(work / "run")},
            "conf": conf,
        },
        "training": {"work_dir": str(work / "training"), "torch_version": torch_version},
    }  # fmt: skip


def write_and_render(path: Path, data: dict[str, Any], layout: Layout, node: str) -> Any:
    """Write the inventory, load it as ``cluster-cli render`` does and put slurm.conf, gres.conf
    and cgroup.conf in the conf directory; returns the loaded cluster."""
    from cluster_cli.build import secrets_dir_for, write_build
    from cluster_cli.loader import load_cluster

    path.write_text(json.dumps(data, indent=2) + "\n")
    cluster = load_cluster(path)
    build = write_build(cluster, layout.work / "build", secrets_dir_for(cluster, path))
    layout.conf_dir.mkdir(parents=True, exist_ok=True)
    for name in ("slurm.conf", "gres.conf", "cgroup.conf"):
        (layout.conf_dir / name).write_text((build.directory / "slurm" / name).read_text())
    for sub in ("state", f"spool/{node}", "log", "run", "training"):
        (layout.work / sub).mkdir(parents=True, exist_ok=True)
    return cluster
