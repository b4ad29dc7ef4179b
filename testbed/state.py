"""What a test bed records in its run dir (state.json), and access to its hosts through it."""

from __future__ import annotations

import fcntl
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import cgroups
from . import host as hostmod
from . import network as net
from . import ssh as sshmod
from .host import Running
from .proc import TestbedError, run

log = logging.getLogger("testbed")

STATE_VERSION = 1


def bridge_ns_name(name: str) -> str:
    return f"cltb-{name}-br"


def host_ns_name(name: str, host: str) -> str:
    return f"cltb-{name}-{host}"


def shared_dir(run_dir: Path, dst: str) -> Path:
    """Where the shared directory mounted at ``dst`` in the hosts lives on the control node."""
    return run_dir / "shared" / (dst.strip("/").replace("/", "_") or "root")


@dataclass
class HostState:
    """One host of a test bed, as state.json records it (``to_json``/``from_json``)."""

    name: str
    index: int  # the host's place in the bed: its veth and address follow from it
    address: str
    mac: str
    netns: str
    machine: str  # systemd-nspawn's --machine name
    cgroups: list[Path]  # one directory per cgroup v1 hierarchy
    host_dir: Path  # "dir" in state.json: the root and the host key live under it
    root: Path
    console_log: Path
    binds_rw: list[tuple[Path, str]]  # (shared directory on the control node, path in the host)
    fuse: bool = False  # the control node's /dev/fuse is bound in
    running: Running | None = None  # the nspawn and container init processes while booted

    @classmethod
    def planned(cls, bed: str, name: str, index: int, address: str, run_dir: Path,
                shared: list[tuple[str, list[str] | None]], fuse: bool = False) -> HostState:
        """Host ``name`` of bed ``bed`` in ``run_dir`` before anything is made for it."""
        return cls(
            name=name,
            index=index,
            address=address,
            mac=net.fixed_mac(bed, name),
            netns=host_ns_name(bed, name),
            machine=host_ns_name(bed, name),
            cgroups=cgroups.host_cgroups(bed, name),
            host_dir=run_dir / "hosts" / name,
            root=run_dir / "hosts" / name / "rootfs",
            console_log=run_dir / "logs" / f"{name}.console.log",
            binds_rw=[(shared_dir(run_dir, dst), dst) for dst, hosts in shared
                      if hosts is None or name in hosts],
            fuse=fuse,
        )

    def boot(self, binds_ro: list[tuple[Path, str]]) -> Running:
        """Boot the host under systemd-nspawn and keep its processes in ``running``."""
        self.running = hostmod.boot(self.machine, self.name, self.root, self.netns, self.console_log,
                                    binds_ro, self.cgroups, binds_rw=self.binds_rw, fuse=self.fuse)
        return self.running

    def wait_booted(self, binds_ro: list[tuple[Path, str]], timeout: float) -> str:
        """Wait for the booted host's systemd; boot it once more if the cgroup remount failed.

        The remount unit failed in a CI run with status 219/CGROUP (systemd could not set up the
        unit's own cgroup, so the script never ran): a boot-time race of the container's systemd,
        not something a deploy should inherit. Services ordered after it would have started
        with read-only controllers, so a fresh boot is the clean retry, not a rerun of the unit.
        """
        assert self.running is not None
        try:
            return hostmod.wait_running(self.name, self.running, self.console_log, timeout)
        except hostmod.CgroupUnitFailed as first:
            log.warning("%s: booting again: %s", self.name, first)
            hostmod.stop(self.name, self.running)
            self.boot(binds_ro)
            return hostmod.wait_running(self.name, self.running, self.console_log, timeout)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "address": self.address,
            "mac": self.mac,
            "netns": self.netns,
            "machine": self.machine,
            "cgroups": [str(c) for c in self.cgroups],
            "dir": str(self.host_dir),
            "root": str(self.root),
            "console_log": str(self.console_log),
            "binds_rw": [[str(src), dst] for src, dst in self.binds_rw],
            # only where bound: the entry of every other host stays as up always wrote it
            **({"fuse": True} if self.fuse else {}),
            "running": asdict(self.running) if self.running is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HostState:
        running = data.get("running")
        return cls(
            name=data["name"],
            index=data["index"],
            address=data["address"],
            mac=data["mac"],
            netns=data["netns"],
            machine=data["machine"],
            cgroups=[Path(c) for c in data.get("cgroups", [])],
            host_dir=Path(data["dir"]),
            root=Path(data["root"]),
            console_log=Path(data["console_log"]),
            # states written before shared directories existed have no binds_rw
            binds_rw=[(Path(src), dst) for src, dst in data.get("binds_rw", [])],
            fuse=bool(data.get("fuse", False)),
            running=Running(**running) if running else None,
        )


class RecordedBed:
    """A test bed as its run dir records it: state.json, the lock every command takes, and the
    way into its hosts (nsenter through the recorded leaders, ssh through hosts.json)."""

    __test__ = False

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.state_file = run_dir / "state.json"
        # state.json's document, its "hosts" read into HostState
        self.state: dict[str, Any] = {}
        if self.state_file.exists():
            self.state = json.loads(self.state_file.read_text())
            if "hosts" in self.state:
                self.state["hosts"] = [HostState.from_json(h) for h in self.state["hosts"]]

    def state_json(self) -> dict[str, Any]:
        """The state as state.json holds it."""
        return {key: [h.to_json() for h in value] if key == "hosts" else value
                for key, value in self.state.items()}

    def save(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state_json(), indent=2, default=str) + "\n")
        tmp.replace(self.state_file)

    @contextmanager
    def lock(self) -> Iterator[None]:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.run_dir / ".lock", "w") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise TestbedError(f"{self.run_dir} is in use by another testbed command") from exc
            yield

    @property
    def hosts(self) -> list[HostState]:
        return list(self.state.get("hosts", []))

    def host(self, name: str) -> HostState:
        for h in self.hosts:
            if h.name == name:
                return h
        raise TestbedError(f"no host {name!r} in {self.run_dir} (hosts: "
                           + ", ".join(h.name for h in self.hosts) + ")")

    def is_alive(self, name: str) -> bool:
        r = self.host(name).running
        return r is not None and r.leader_alive()

    def binds_ro(self) -> list[tuple[Path, str]]:
        """The read-only binds up gave every host."""
        saved = self.state.get("binds_ro")
        if saved is None and self.state.get("mirror"):  # state of an older version
            saved = [(self.state["mirror"], "/mirror")]
        return [(Path(src), dst) for src, dst in saved or []]

    # ------------------------------------------------------------ access
    def ssh_hosts(self) -> list[sshmod.SshHost]:
        data = json.loads((self.run_dir / "hosts.json").read_text())
        return [sshmod.SshHost(d["name"], d["address"], d["user"], d["port"], d["key"],
                               d["common_args"]) for d in data]

    def ssh_host(self, name: str) -> sshmod.SshHost:
        for h in self.ssh_hosts():
            if h.name == name:
                return h
        raise TestbedError(f"no host {name!r}")

    def exec_argv(self, name: str, argv: list[str]) -> list[str]:
        """argv that runs ``argv`` inside host ``name`` (all its namespaces)."""
        r = self.host(name).running
        if r is None or not r.leader_alive():
            raise TestbedError(f"host {name} is not running")
        return hostmod.nsenter_argv(r.leader_pid, argv)

    def exec(self, name: str, argv: list[str], check: bool = True,
             timeout: float | None = 600) -> Any:
        return run(self.exec_argv(name, argv), check=check, timeout=timeout)

    def ssh(self, name: str, argv: list[str], check: bool = True,
            timeout: float | None = 600) -> Any:
        return run(self.ssh_host(name).argv(argv), check=check, timeout=timeout)

    def wait_ssh(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            cp = run(self.ssh_host(name).argv(["true"]), check=False, timeout=30)
            if cp.returncode == 0:
                return
            last = cp.stderr.strip()
            time.sleep(0.3)
        raise TestbedError(f"ssh to {name} not working after {timeout}s: {last}")
