"""Slurm built from source: a release tarball needs its address and its checksum."""

from __future__ import annotations

from cluster_cli.model import Slurm
from cluster_cli.resolve.problems import Problems


def check_build(slurm: Slurm, problems: Problems) -> None:
    build = slurm.build
    if slurm.install == "build" and build.source == "tarball":
        if build.tarball_url is None:
            problems.add(("slurm", "build", "tarball_url"), "source: tarball needs tarball_url")
        if build.tarball_sha256 is None:
            problems.add(("slurm", "build", "tarball_sha256"), "source: tarball needs tarball_sha256")
