"""``AutoDetect=nvml`` through Slurm's own plugin against the driver's ``nvidia-smi``.

What the plugin found is read from the running slurmd's own log (``SlurmdDebug=debug2``: its
``GPU index N:``, ``Name:``, ``UUID:``, ``Device File`` lines); what slurmd keeps of it from
``slurmd -G``, which loads the GRES configuration as slurmd does at start, prints its ``Gres
Name=gpu`` records and exits. Slurm 22.05's plugin reads no memory size: memory is nvidia-smi's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cluster_cli.gpu_proof.daemons import Layout, run
from cluster_cli.gpu_proof.machine import Gpu

_INDEX = re.compile(r"gpu_list_nvml: GPU index (\d+):$")
_FIELD = re.compile(r"gpu_list_nvml:     (Name|UUID|Device File \(minor number\)): (.*)$")


@dataclass
class NvmlGpu:
    """One GPU as Slurm's gpu/nvml plugin reported it."""

    index: int
    name: str = ""
    uuid: str = ""
    file: str = ""


@dataclass
class Autodetected:
    returncode: int
    output: str
    nvml: list[NvmlGpu] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)


def nvml_gpus(log: str) -> list[NvmlGpu]:
    """The GPUs of the plugin's last listing in a slurmd log."""
    nvml: list[NvmlGpu] = []
    for line in log.splitlines():
        index = _INDEX.search(line)
        if index:
            if index.group(1) == "0":
                nvml = []  # a later listing (a restart) replaces an earlier one
            nvml.append(NvmlGpu(int(index.group(1))))
            continue
        found = _FIELD.search(line)
        if found and nvml:
            key, value = found.groups()
            setattr(nvml[-1], {"Name": "name", "UUID": "uuid"}.get(key, "file"), value.strip())
    return nvml


def kept_records(output: str) -> list[dict[str, str]]:
    """``slurmd -G``'s ``Gres Name=gpu Type=... File=...`` lines, as dicts."""
    return [dict(re.findall(r"(\w+)=(\S*)", line[line.index("Gres Name="):]))
            for line in output.splitlines() if "Gres Name=gpu" in line]


def slurmd_gres(layout: Layout, node: str, slurmd_log: str) -> Autodetected:
    done = run(layout, [layout.sbin("slurmd"), "-G", "-D", "-f", str(layout.slurm_conf), "-N", node])
    output = done.stdout + done.stderr
    return Autodetected(done.returncode, output, nvml_gpus(slurmd_log), kept_records(output))


def slurm_name(nvidia_name: str) -> str:
    """How the plugin names a GPU: ``NVIDIA H200`` -> ``nvidia_h200``."""
    return re.sub(r"\s+", "_", nvidia_name.strip()).lower()


def problems(found: Autodetected, listed: list[Gpu], gpu_type: str) -> list[str]:
    """What differs between the plugin's view and the driver's; [] when they agree."""
    issues = []
    if len(found.nvml) != len(listed):
        issues.append(f"gpu/nvml found {len(found.nvml)} GPU(s), nvidia-smi lists {len(listed)}")
    by_uuid = {gpu.uuid: gpu for gpu in found.nvml}
    for gpu in listed:
        seen = by_uuid.get(gpu.uuid)
        if seen is None:
            issues.append(f"GPU {gpu.index} {gpu.uuid}: not found by gpu/nvml")
        elif seen.name.lower() != slurm_name(gpu.name):
            issues.append(f"GPU {gpu.index}: gpu/nvml names it {seen.name!r}, nvidia-smi {gpu.name!r}")
    if len(found.kept) != len(listed):
        issues.append(f"slurmd keeps {len(found.kept)} gres/gpu record(s), expected {len(listed)}")
    wrong_type = [record.get("Type") for record in found.kept if gpu_type not in record.get("Type", "")]
    if wrong_type:
        issues.append(f"slurmd's gres/gpu types {wrong_type} do not hold {gpu_type!r}")
    return issues
