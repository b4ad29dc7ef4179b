"""Fixtures for the test bed tests.

Tests marked ``testbed`` boot real systemd hosts: they need root,
debootstrap, systemd-nspawn, dpkg-scanpackages and nc, and (once, to fill
the cache) the Debian archive. They skip with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# the testbed package lives at the repo root and is not installed
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from testbed import Testbed, TestbedConfig, build_mirror
from testbed.core import DEFAULT_CACHE_DIR

CACHE_DIR = Path(os.environ.get("CLUSTER_TESTBED_CACHE", str(DEFAULT_CACHE_DIR)))
TOOLS = {
    "debootstrap": "debootstrap",
    "systemd-nspawn": "systemd-container",
    "dpkg-scanpackages": "dpkg-dev",
    "nc": "netcat-openbsd",
    "nsenter": "util-linux",
    "ssh": "openssh-client",
}


def testbed_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "test bed needs root (network namespaces, mounts, systemd-nspawn)"
    missing = [f"{tool} (package {pkg})" for tool, pkg in TOOLS.items() if shutil.which(tool) is None]
    if missing:
        return ("test bed tools missing: " + ", ".join(missing)
                + "; apt-get install systemd-container debootstrap dpkg-dev netcat-openbsd")
    if not Path("/sys/fs/cgroup").is_dir():
        return "no /sys/fs/cgroup"
    return None


@pytest.fixture(scope="session")
def testbed_cache_dir() -> Path:
    return CACHE_DIR


@pytest.fixture(scope="session")
def testbed_requirements() -> None:
    reason = testbed_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def small_mirror(testbed_requirements: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bookworm mirror with one small package (hello) and its dependencies."""
    out = tmp_path_factory.mktemp("mirror")
    build_mirror(out, "bookworm", ["hello"], cache_dir=CACHE_DIR)
    return out


@pytest.fixture(scope="module")
def bed(testbed_requirements: None, small_mirror: Path,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """Two booted bookworm hosts, h1 and h2, with the small mirror, /srv/shared shared by both
    and /srv/h2-only bound in h2 alone."""
    run_dir = tmp_path_factory.mktemp("bed")
    tb = Testbed(run_dir)
    cfg = TestbedConfig(hosts=["h1", "h2"], name=f"pt{os.getpid()}", run_dir=run_dir,
                        cache_dir=CACHE_DIR, mirror=small_mirror,
                        shared=[("/srv/shared", None), ("/srv/h2-only", ["h2"])])
    try:
        tb.up(cfg)
        yield tb
    finally:
        Testbed(run_dir).down()
