"""GPU device files: each node group's, checked against its GPU count and how it finds its GPUs."""

from __future__ import annotations

from cluster_cli.errors import Location
from cluster_cli.model import Gpus, NodeGroup
from cluster_cli.resolve.problems import Problems, expand


def group_device_files(where: Location, group: NodeGroup, node_count: int, problems: Problems) -> list[str]:
    """The group's device files, in node order; none where NVML finds them or they are wrong."""
    gpus = group.gpus
    if gpus is None:
        return []
    at = where + ("gpus",)
    if gpus.autodetect == "nvml":
        _check_autodetected(at, gpus, group.host is not None, problems)
        return []
    if gpus.devices is None:
        problems.add(
            at + ("devices",), "list the device files (e.g. /dev/nvidia[0-7]) or set autodetect: nvml"
        )
        return []
    devices = expand(problems, at + ("devices",), gpus.devices)
    wanted = gpus.count * (node_count if group.host is not None else 1)
    if devices and len(devices) != wanted:
        scope = f"{gpus.count} per node x {node_count} nodes" if group.host is not None else "count"
        problems.add(at + ("devices",), f"{len(devices)} device files but {wanted} GPUs ({scope})")
        return []
    if len(set(devices)) != len(devices):
        problems.add(at + ("devices",), "device files repeat")
        return []  # one mistake, one problem: not also "belongs to two nodes" on every host
    for device in devices:
        if not device.startswith("/"):
            problems.add(at + ("devices",), f"device file '{device}' must be an absolute path")
            break
    return devices


def _check_autodetected(at: Location, gpus: Gpus, single_host: bool, problems: Problems) -> None:
    """NVML finds a machine's real GPUs itself, and all of them."""
    if gpus.devices is not None:
        problems.add(
            at + ("devices",), "autodetect: nvml finds the devices; listing them too makes slurmd fail"
        )
    if gpus.fake:
        problems.add(at + ("fake",), "fake devices cannot be autodetected by NVML; use autodetect: off")
    if single_host:
        problems.add(
            at + ("autodetect",), "single-host groups split one machine's GPUs: list devices instead"
        )
