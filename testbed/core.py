"""The test bed: up, down, status, exec — state recorded in the run dir."""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import host as hostmod
from . import rootfs as rfs
from . import ssh as sshmod
from .bringup import BringUp, refuse_foreign
from .proc import TestbedError, Timer
from .state import RecordedBed
from .teardown import tear_down

log = logging.getLogger("testbed")

DEFAULT_CACHE_DIR = Path(os.environ.get("CLUSTER_TESTBED_CACHE", "/var/cache/cluster-testbed"))
DEFAULT_RUN_ROOT = Path(os.environ.get("CLUSTER_TESTBED_RUNS", "/var/lib/cluster-testbed"))
DEFAULT_SUBNET = "10.213.47.0/24"
APT_SOURCES = ("mirror", "none")
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,20}$")
HOST_RE = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


@dataclass
class TestbedConfig:
    """What ``up`` builds. Everything has a default except the host names."""

    __test__ = False

    hosts: list[str]
    name: str = "tb"
    release: str = "bookworm"
    subnet: str = DEFAULT_SUBNET
    cache_dir: Path = DEFAULT_CACHE_DIR
    run_dir: Path | None = None  # default DEFAULT_RUN_ROOT/<name>
    mirror: Path | None = None  # an apt repository dir (see testbed.mirror), bound at /mirror
    copy_mode: str = "overlay"  # or "copy"
    base_packages: list[str] = field(default_factory=lambda: list(rfs.BASE_PACKAGES))
    binds_ro: list[tuple[Path, str]] = field(default_factory=list)  # extra read-only binds
    # Directories shared read-write by some hosts, like an NFS export: (path inside the hosts,
    # host names or None for every host). Made under RUN_DIR/shared/, removed by down.
    shared: list[tuple[str, list[str] | None]] = field(default_factory=list)
    # Hosts given the control node's /dev/fuse (bound in), so that they can mount FUSE file
    # systems such as sshfs; none by default.
    fuse: list[str] = field(default_factory=list)
    # "mirror": the hosts' only apt source (and pip's only index) is the bound mirror, as if
    # installed from it; "none": no source at all, the mirror is only bound at /mirror (the
    # deploy's package_mirror must point the hosts at it).
    apt_sources: str = "mirror"
    debian_mirror: str = rfs.DEFAULT_DEBIAN_MIRROR
    boot_timeout: float = 120.0

    def validate(self) -> None:
        if not NAME_RE.match(self.name):
            raise TestbedError(f"bad test bed name {self.name!r} (want {NAME_RE.pattern})")
        if not self.hosts:
            raise TestbedError("no hosts given")
        for h in self.hosts:
            if not HOST_RE.match(h):
                raise TestbedError(f"bad host name {h!r} (want {HOST_RE.pattern})")
        if len(set(self.hosts)) != len(self.hosts):
            raise TestbedError("duplicate host names")
        if self.release not in rfs.RELEASES:
            raise TestbedError(f"release must be one of {rfs.RELEASES}")
        if self.copy_mode not in rfs.COPY_MODES:
            raise TestbedError(f"copy mode must be one of {rfs.COPY_MODES}")
        if self.apt_sources not in APT_SOURCES:
            raise TestbedError(f"apt sources must be one of {APT_SOURCES}")
        for dst, hosts in self.shared:
            if not dst.startswith("/") or dst == "/" or ".." in dst.split("/"):
                raise TestbedError(f"shared directory {dst!r}: want an absolute path inside the hosts")
            unknown = sorted(set(hosts or []) - set(self.hosts))
            if unknown:
                raise TestbedError(f"shared directory {dst}: unknown hosts {', '.join(unknown)}")
        unknown_fuse = sorted(set(self.fuse) - set(self.hosts))
        if unknown_fuse:
            raise TestbedError(f"/dev/fuse for unknown hosts {', '.join(unknown_fuse)}")
        if self.fuse and not Path("/dev/fuse").exists():
            raise TestbedError("/dev/fuse is asked for but this machine has none (modprobe fuse)")
        if len({dst for dst, _ in self.shared}) != len(self.shared):
            raise TestbedError("a shared directory is given twice")
        if self.mirror is not None and not (self.mirror / "Packages").exists():
            raise TestbedError(f"{self.mirror} is not a test bed mirror (no Packages index)")


def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise TestbedError("the test bed needs root (namespaces, mounts, nspawn)")
    missing = [t for t in ("systemd-nspawn", "debootstrap", "ip", "nsenter", "mount")
               if shutil.which(t) is None]
    if missing:
        raise TestbedError(
            "missing: " + ", ".join(missing)
            + " (apt-get install systemd-container debootstrap iproute2 util-linux)"
        )
    sshmod.check_client_tools()


class Testbed(RecordedBed):
    """A set of systemd hosts under one run dir. Create with ``Testbed(run_dir)``."""

    __test__ = False

    @classmethod
    def for_name(cls, name: str = "tb", run_dir: Path | None = None) -> Testbed:
        return cls(run_dir if run_dir is not None else DEFAULT_RUN_ROOT / name)

    # ------------------------------------------------------------ up
    def up(self, cfg: TestbedConfig) -> dict[str, Any]:
        """Create and boot every host; return the state (with timings)."""
        cfg.validate()
        check_prerequisites()
        with self.lock():
            if any(self.is_alive(h.name) for h in self.hosts):
                raise TestbedError(f"test bed in {self.run_dir} is already up: run down first")
            if self.state:
                tear_down(self)  # leftovers of a crashed run
            refuse_foreign(cfg)
            return BringUp(self, cfg).run()

    def restart(self, name: str, timeout: float = 120.0) -> dict[str, Any]:
        """Power one host off and boot it again from the same root (a reboot:
        what the host wrote survives, units enabled at boot come back)."""
        with self.lock(), Timer() as t:
            self._stop_locked(name)
            state = self._start_locked(name, timeout)
        return {"name": name, "systemd": state, "seconds": round(t.seconds, 2)}

    def stop(self, name: str) -> dict[str, Any]:
        """Power one host off (its root, network and state stay: ``start`` boots it again)."""
        with self.lock(), Timer() as t:
            self._stop_locked(name)
        return {"name": name, "systemd": "stopped", "seconds": round(t.seconds, 2)}

    def start(self, name: str, timeout: float = 120.0) -> dict[str, Any]:
        """Boot a host ``stop`` powered off; a host already running is left alone."""
        with self.lock(), Timer() as t:
            r = self.host(name).running
            if r is not None and r.leader_alive():
                state = hostmod.system_state(r.leader_pid)
            else:
                state = self._start_locked(name, timeout)
        return {"name": name, "systemd": state, "seconds": round(t.seconds, 2)}

    def _stop_locked(self, name: str) -> None:
        h = self.host(name)
        r = h.running
        if r is not None and r.any_alive():
            hostmod.stop(name, r)
        h.running = None
        self.save()

    def _start_locked(self, name: str, timeout: float) -> str:
        h = self.host(name)
        binds = self.binds_ro()
        h.boot(binds)
        self.save()
        state = h.wait_booted(binds, timeout)
        self.save()
        self.wait_ssh(name, timeout=60)
        return str(state)

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run_dir": str(self.run_dir),
            "name": self.state.get("name"),
            "release": self.state.get("release"),
            "bridge_ns": self.state.get("bridge_ns"),
            "hosts": [],
        }
        for h in self.hosts:
            r = h.running
            alive = r is not None and r.leader_alive()
            state = hostmod.system_state(r.leader_pid) if alive and r else "stopped"
            out["hosts"].append({
                "name": h.name, "address": h.address, "mac": h.mac,
                "netns": h.netns, "leader_pid": r.leader_pid if alive and r else None,
                "systemd": state,
            })
        if (self.run_dir / "ssh_config").exists():
            out["ssh_config"] = str(self.run_dir / "ssh_config")
            out["inventory"] = str(self.run_dir / "inventory.yml")
        out["timings"] = self.state.get("timings", {})
        return out

    # ------------------------------------------------------------ down
    def down(self, purge: bool = False, cache_dir: Path | None = None) -> list[str]:
        """Stop every host and remove what ``up`` made. Safe to repeat.

        Returns a list of what was done. With ``purge`` the cache dir
        (base rootfs and mirrors) goes too.
        """
        done: list[str] = []
        if self.run_dir.exists():
            with self.lock():
                done = tear_down(self)
        if purge:
            target = cache_dir if cache_dir is not None else DEFAULT_CACHE_DIR
            if target.exists():
                rfs.safe_rmtree(target)
                done.append(f"purged cache {target}")
        return done
