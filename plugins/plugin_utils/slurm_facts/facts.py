"""The data files of this package, loaded once on first use, and what a Slurm version maps to.

data/slurm-<series>.json: what each series' own man pages say (devtools/slurm_docs.py writes them).
data/rules.json: the facts a person read from the man pages, SchedMD's guides and release notes.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
# The series Debian 12's packages bring: the target where an inventory pins no slurm.version.
DEFAULT_SERIES = "22.05"
# "22.05.8-4+deb12u3", "22.05.8", "22.05", with an optional Debian epoch ("1:22.05.8").
_RELEASE = re.compile(r"^(?:\d+:)?(\d{2})\.(\d{2})(?:$|[.\-+~])")


class UnknownSlurmVersion(ValueError):
    """A Slurm version this package has no rules for."""


@functools.cache
def rules() -> dict[str, Any]:
    return json.loads((DATA_DIR / "rules.json").read_text(encoding="utf-8"))


@functools.cache
def series_data(name: str) -> dict[str, Any]:
    return json.loads((DATA_DIR / f"slurm-{name}.json").read_text(encoding="utf-8"))


def releases() -> list[str]:
    """Slurm's major releases, oldest first."""
    return list(rules()["releases"]["order"])


@functools.cache
def supported_series() -> tuple[str, ...]:
    """The series with a data file here, oldest first."""
    present = {path.stem.removeprefix("slurm-") for path in DATA_DIR.glob("slurm-*.json")}
    return tuple(release for release in releases() if release in present)


def release_of(version: str) -> str:
    """The major release ("22.05") of a version string; UnknownSlurmVersion when it names none."""
    found = _RELEASE.match(version.strip())
    if found is None or f"{found.group(1)}.{found.group(2)}" not in releases():
        raise UnknownSlurmVersion(
            f"{version!r} is not a Slurm release this package knows (known: {', '.join(releases())})"
        )
    return f"{found.group(1)}.{found.group(2)}"


def series(version: str) -> str:
    """The supported series of ``version`` ("22.05.8-4+deb12u3" -> "22.05").

    Raises UnknownSlurmVersion, naming the supported series, for any other version."""
    supported = supported_series()
    try:
        release = release_of(version)
    except UnknownSlurmVersion:
        release = ""
    if release not in supported:
        raise UnknownSlurmVersion(
            f"no Slurm rules for version {version!r}: the supported series are {', '.join(supported)}"
        )
    return release


def has_facts(version: str) -> bool:
    """Whether ``version`` is of a supported series (one with facts here)."""
    try:
        series(version)
    except UnknownSlurmVersion:
        return False
    return True


def rules_series(version: str) -> tuple[str, str]:
    """The series whose rules apply to a host that reports ``version``, and a line saying why.

    A version with no rules here ("" before Slurm is installed, or another release) gets the oldest
    supported series: its man pages note the most restarts, and a key it does not know counts as
    unknown, which restarts (the conservative choice)."""
    try:
        return series(version), ""
    except UnknownSlurmVersion:
        oldest = supported_series()[0]
        shown = version or "unknown"
        return oldest, (
            f"Slurm version {shown} has no rules here (supported: {', '.join(supported_series())}):"
            f" the rules of {oldest}, which restart the most, apply"
        )


def file_data(name: str, file_name: str) -> dict[str, Any]:
    """One configuration file's facts in series ``name``; {} for a file the series does not document."""
    return series_data(name)["files"].get(file_name, {})


@functools.cache
def spellings(name: str, file_name: str) -> dict[str, str]:
    """lower-case key -> the key as the man page spells it, for every key of ``file_name``."""
    facts = file_data(name, file_name)
    keys = set(facts.get("keys", {})) | set(facts.get("records", {}))
    return {key.lower(): key for key in keys}


def known_keys(version: str, filename: str) -> frozenset[str]:
    """Every key ``filename``'s man page documents in ``version``'s series, spelled as it does.

    For slurm.conf: the keys of the PARAMETERS section, ``Include`` and the keys that open a node,
    partition, nodeset, down-nodes, frontend or poweraction line (NodeName, PartitionName ...), not
    the keys that only appear on those lines. An undocumented file has no keys."""
    return frozenset(spellings(series(version), filename).values())
