"""Multi-host test bed: real Debian systemd hosts on one machine.

Each host is a systemd-nspawn container booted from a cached debootstrap
rootfs, in a network namespace of its own joined to a private bridge;
the control node reaches them over real SSH. See docs/testbed.md.
"""

from .core import DEFAULT_CACHE_DIR, DEFAULT_RUN_ROOT, Testbed, TestbedConfig
from .mirror import build_mirror
from .proc import CommandError, TestbedError
from .rootfs import BASE_PACKAGES, RELEASES, build_base

__all__ = [
    "BASE_PACKAGES",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_RUN_ROOT",
    "RELEASES",
    "CommandError",
    "Testbed",
    "TestbedConfig",
    "TestbedError",
    "build_base",
    "build_mirror",
]
