"""Per-host cgroup v1 subtrees.

Started from the root of every controller hierarchy, all containers (and the
slurmd each runs) would share the controllers' top level with each other and
with any Slurm running in the root namespace (slurmd makes
``<controller>/slurm_<node>/...``). Each host is therefore started inside
``<controller>/<our own cgroup>/cluster-testbed/<testbed>/<host>`` for every
v1 controller; nspawn gives the container a cgroup namespace rooted there, so
inside the host that subtree is the whole hierarchy. The subtree is made
under the invoking process's own cgroup, so nothing escapes the limits it
runs under. The ``name=systemd`` hierarchy is left to nspawn.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

TOP = "cluster-testbed"


def _v1_mounts() -> list[tuple[frozenset[str], Path]]:
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) < 4 or parts[2] != "cgroup":
            continue
        opts = frozenset(parts[3].split(","))
        if any(o.startswith("name=") for o in opts):
            continue
        out.append((opts, Path(parts[1])))
    return out


def _own_paths() -> dict[frozenset[str], str]:
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _hid, ctrls, path = line.split(":", 2)
        if ctrls:
            own[frozenset(ctrls.split(","))] = path
    return own


def host_cgroups(testbed: str, host: str) -> list[Path]:
    """The cgroup directories (one per v1 hierarchy) for ``host``; not created."""
    own = _own_paths()
    dirs = []
    for opts, mp in _v1_mounts():
        for ctrls, path in own.items():
            if ctrls <= opts:
                dirs.append(mp / path.lstrip("/") / TOP / testbed / host)
                break
    return dirs


def create(dirs: list[Path]) -> None:
    for d in dirs:
        # make each missing level; cpuset needs cpus/mems before a task may join
        missing = []
        p = d
        while not p.exists():
            missing.append(p)
            p = p.parent
        for level in reversed(missing):
            level.mkdir()
            for knob in ("cpuset.cpus", "cpuset.mems"):
                if (level / knob).exists():
                    (level / knob).write_text((level.parent / knob).read_text())


def attach_self(dirs: list[Path]) -> None:
    """Move the calling process into ``dirs`` (used between fork and exec)."""
    pid = str(os.getpid())
    for d in dirs:
        with open(d / "cgroup.procs", "w") as fh:
            fh.write(pid)


def remove(dirs: list[Path], timeout: float = 10.0) -> list[Path]:
    """rmdir the host's subtrees bottom-up (and the empty parents we made).
    Returns what could not be removed."""
    left: list[Path] = []
    for d in dirs:
        deadline = time.monotonic() + timeout
        while d.exists():
            for dirpath, _dirs, _files in os.walk(d, topdown=False):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
            if not d.exists() or time.monotonic() > deadline:
                break
            time.sleep(0.1)  # exiting tasks still charged: retry
        if d.exists():
            left.append(d)
            continue
        for parent in (d.parent, d.parent.parent):  # <testbed>, cluster-testbed
            try:
                parent.rmdir()
            except OSError:
                break
    return left
