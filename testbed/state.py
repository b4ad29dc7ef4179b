"""What a test bed records about its hosts in the run dir's state.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import cgroups
from . import network as net
from .host import Running

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
    running: Running | None = None  # the nspawn and container init processes while booted

    @classmethod
    def planned(cls, bed: str, name: str, index: int, address: str, run_dir: Path,
                shared: list[tuple[str, list[str] | None]]) -> HostState:
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
        )

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
            running=Running(**running) if running else None,
        )
