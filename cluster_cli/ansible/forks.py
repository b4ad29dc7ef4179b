"""How many hosts ansible-playbook works on at once (its forks), sized from the control node.

A worker mostly waits on its host (SSH, apt, a daemon's start), so a core keeps several busy:
8 per core. Each worker is a fork of ansible-playbook, about 60 MiB once it has written to its
copy of the parent's memory; half of the available memory is the most they may take. More
workers than hosts only cost forks. An ANSIBLE_FORKS the user set wins over all of this.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

WORKERS_PER_CORE = 8
WORKER_MIB = 60
MIN_FORKS = 5  # Ansible's own default
MAX_FORKS = 256


def available_mib(meminfo: str = "/proc/meminfo") -> int | None:
    try:
        with open(meminfo, encoding="ascii") as rows:
            for row in rows:
                if row.startswith("MemAvailable:"):
                    return int(row.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def sized_forks(hosts: int, cores: int, memory_mib: int | None) -> int:
    """Forks for ``hosts`` hosts on a control node with ``cores`` cores and ``memory_mib`` MiB
    available (None: unknown, the cores decide)."""
    by_cores = WORKERS_PER_CORE * max(1, cores)
    by_memory = MAX_FORKS if memory_mib is None else memory_mib // 2 // WORKER_MIB
    return max(MIN_FORKS, min(by_cores, by_memory, MAX_FORKS, max(1, hosts)))


def forks_environment(hosts: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """ANSIBLE_FORKS for a run over ``hosts`` hosts, unless the user set it."""
    environ = os.environ if environ is None else environ
    if environ.get("ANSIBLE_FORKS"):
        return {}
    return {"ANSIBLE_FORKS": str(sized_forks(hosts, os.cpu_count() or 1, available_mib()))}
