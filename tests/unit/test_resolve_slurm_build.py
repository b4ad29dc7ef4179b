"""resolve/slurm_build.py: Slurm built from a release tarball."""

from __future__ import annotations

from unit_helpers import BASE, problem, problems


def test_tarball_build_needs_url_and_checksum():
    text = BASE + "slurm:\n  install: build\n  build:\n    source: tarball\n"
    assert problems(text) == [
        problem(text, "  build:", "slurm.build.tarball_sha256", "source: tarball needs tarball_sha256"),
        problem(text, "  build:", "slurm.build.tarball_url", "source: tarball needs tarball_url"),
    ]
