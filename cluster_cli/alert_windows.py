"""The alert rules' `for` windows: how long a rule's condition must hold before its alert fires.
The defaults are production's; the inventory's `monitoring.alert_for` changes any of them (a test
bed with short Slurm timeouts wants short windows). render/alert_rules writes the rules with them;
the model checks the names against this table."""

from __future__ import annotations

import re

DEFAULT_WINDOWS = {
    "SlurmctldDown": "2m",
    "SlurmdbdDown": "5m",
    "SlurmMetricsMissing": "10m",
    "SlurmNodesDown": "5m",
    "SlurmNodesDrainedNotByAdmin": "1m",
    "SlurmNodesAllocatedWithoutJob": "2m",
    "GpusFewerThanInventory": "5m",
    "GpuUncorrectedEccErrors": "0s",
    "GpuCorrectedEccErrorsRising": "0s",
    "FilesystemAlmostFull": "10m",
    "SharedMountMissing": "5m",
}
# Prometheus' duration: one or more NUMBER UNIT parts, largest unit first (1h30m).
DURATION = re.compile(r"(?:[0-9]+y)?(?:[0-9]+w)?(?:[0-9]+d)?(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+s)?(?:[0-9]+ms)?")


def check_alert_name(name: str) -> str:
    if name not in DEFAULT_WINDOWS:
        raise ValueError(f"{name!r} is not one of the cluster's alerts ({', '.join(sorted(DEFAULT_WINDOWS))})")
    return name


def check_duration(value: str) -> str:
    if not value or not DURATION.fullmatch(value):
        raise ValueError(f"{value!r} is not a Prometheus duration (e.g. 30s, 5m, 1h30m)")
    return value


def window(name: str, overrides: dict[str, str]) -> str:
    """The `for` window of the alert ``name``: the inventory's, else the default."""
    return overrides.get(name, DEFAULT_WINDOWS[name])
