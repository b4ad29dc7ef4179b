"""The steps of ``Testbed.up``, in their order.

Every step records what it made in state.json before the next one starts, so that ``down``
(from any process) undoes an ``up`` that failed half-way; each also puts its time into the
state's timings.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import cgroups
from . import host as hostmod
from . import network as net
from . import rootfs as rfs
from . import ssh as sshmod
from .proc import TestbedError, Timer
from .state import STATE_VERSION, HostState, RecordedBed, bridge_ns_name, host_ns_name, shared_dir

if TYPE_CHECKING:
    from .core import TestbedConfig

# (name, address, public host key) of each host, for the control node's known_hosts
HostKeys = list[tuple[str, str, str]]


@contextmanager
def timed(timings: dict[str, Any], key: str) -> Iterator[None]:
    """Record the seconds the block takes as ``timings[key]`` (nothing when it fails)."""
    with Timer() as t:
        yield
    timings[key] = round(t.seconds, 2)


def refuse_foreign(cfg: TestbedConfig) -> None:
    """Namespaces or cgroups with this bed's names that our own state does not
    account for belong to a bed of the same name in another run dir: never
    take them over (or delete them later)."""
    names = [bridge_ns_name(cfg.name)] + [host_ns_name(cfg.name, h) for h in cfg.hosts]
    taken = [n for n in names if net.netns_exists(n)]
    taken += [str(c) for h in cfg.hosts for c in cgroups.host_cgroups(cfg.name, h)
              if c.exists()]
    if taken:
        raise TestbedError(
            f"a test bed named {cfg.name!r} seems up in another run dir ({', '.join(taken)}): "
            "take that one down or choose another --name")


def planned_state(cfg: TestbedConfig, run_dir: Path, bridge_address: str, addresses: list[str],
                  timings: dict[str, Any]) -> dict[str, Any]:
    """The state of the bed ``cfg`` describes, before anything is made for it."""
    return {
        "version": STATE_VERSION,
        "name": cfg.name,
        "release": cfg.release,
        "subnet": cfg.subnet,
        "bridge_ns": bridge_ns_name(cfg.name),
        "bridge_address": bridge_address,
        "copy_mode": cfg.copy_mode,
        "mirror": str(cfg.mirror) if cfg.mirror else None,
        "apt_sources": cfg.apt_sources,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "hosts": [HostState.planned(cfg.name, h, i, addresses[i], run_dir, cfg.shared, fuse=h in cfg.fuse)
                  for i, h in enumerate(cfg.hosts)],
        "timings": timings,
    }


def etc_hosts(hosts: list[HostState]) -> str:
    """/etc/hosts of every host: each host reaches the others by name."""
    return ("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            + "".join(f"{h.address}\t{h.name}\n" for h in hosts))


def configure_host(h: HostState, root: Path, hosts_file: str, authorized_key: str,
                   mirror: Path | None, mirror_sources: bool) -> str:
    """Write host ``h``'s files into its root; return its public host key."""
    host_pub = sshmod.generate_host_key(h.host_dir / "hostkey", f"root@{h.name}")
    hostmod.configure_root(root, hostmod.HostFiles(
        name=h.name, address=h.address, etc_hosts=hosts_file,
        authorized_key=authorized_key, host_key_dir=h.host_dir / "hostkey",
        mirror=mirror_sources,
        wheelhouse=mirror_sources and mirror is not None and (mirror / "wheels").is_dir()))
    if mirror is not None:
        (root / "mirror").mkdir(exist_ok=True)
    return host_pub


def read_only_binds(cfg: TestbedConfig) -> list[tuple[Path, str]]:
    """What every host binds read-only: the configured binds and the mirror at /mirror."""
    binds: list[tuple[Path, str]] = list(cfg.binds_ro)
    if cfg.mirror is not None:
        binds.append((cfg.mirror.resolve(), "/mirror"))
    return binds


class BringUp:
    """One ``up`` of ``cfg`` in ``bed``: the caller holds the bed's lock and has removed what an
    earlier run left. ``run`` takes every step and returns the state as state.json holds it."""

    def __init__(self, bed: RecordedBed, cfg: TestbedConfig) -> None:
        self.bed = bed
        self.cfg = cfg
        self.bridge_ns = bridge_ns_name(cfg.name)
        # the bound mirror is the hosts' only apt source and pip index (else they have none)
        self.mirror_sources = cfg.mirror is not None and cfg.apt_sources == "mirror"
        self.timings: dict[str, Any] = {}

    def run(self) -> dict[str, Any]:
        with Timer() as total:
            bridge_address, prefixlen = self.record_plan()
            base = self.build_base()
            key, pub = self.make_client_key()
            self.make_network(bridge_address, prefixlen)
            host_keys = self.make_host_roots(base, pub)
            binds = self.record_binds()
            self.boot_hosts(binds)
            if self.mirror_sources:
                self.update_apt_lists()
            self.wait_for_ssh(key, host_keys)
        self.timings["up_total_seconds"] = round(total.seconds, 2)
        self.bed.save()
        return self.bed.state_json()

    def record_plan(self) -> tuple[str, int]:
        """Record the bed about to be made; return the bridge's address and the prefix length."""
        run_dir, cfg = self.bed.run_dir, self.cfg
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        bridge_address, addresses, prefixlen = net.host_addresses(cfg.subnet, len(cfg.hosts))
        self.bed.state = planned_state(cfg, run_dir, bridge_address, addresses, self.timings)
        self.bed.save()
        return bridge_address, prefixlen

    def build_base(self) -> Path:
        """The cached base rootfs of the release (built when missing)."""
        cfg = self.cfg
        with timed(self.timings, "base_seconds"):
            base = rfs.build_base(cfg.cache_dir, cfg.release, cfg.base_packages, cfg.debian_mirror)
        self.bed.state["base"] = str(base.path)
        self.timings["base_from_cache"] = base.build_seconds is None
        return base.path

    def make_client_key(self) -> tuple[Path, str]:
        """A new key pair for every run; return the private key's path and the public key."""
        key = self.bed.run_dir / "id_ed25519"
        with timed(self.timings, "keygen_seconds"):
            for old in (key, Path(str(key) + ".pub")):
                if old.exists():
                    old.unlink()
            pub = sshmod.generate_keypair(key, f"testbed-{self.cfg.name}")
        return key, pub

    def make_network(self, bridge_address: str, prefixlen: int) -> None:
        with timed(self.timings, "network_seconds"):
            net.setup_bridge(self.bridge_ns, bridge_address, prefixlen)
            for h in self.bed.hosts:
                net.setup_host_link(self.bridge_ns, h.netns, h.index, h.mac, h.address, prefixlen)
        self.bed.save()

    def make_host_roots(self, base: Path, authorized_key: str) -> HostKeys:
        """Each host's root from the base, configured as that host."""
        hosts_file = etc_hosts(self.bed.hosts)
        host_keys: HostKeys = []
        copy_times = []
        for h in self.bed.hosts:
            with Timer() as t:
                root = rfs.make_host_root(base, h.host_dir, self.cfg.copy_mode)
            copy_times.append(round(t.seconds, 2))
            self.bed.save()
            host_pub = configure_host(h, root, hosts_file, authorized_key, self.cfg.mirror,
                                      self.mirror_sources)
            host_keys.append((h.name, h.address, host_pub))
        self.timings["host_root_seconds"] = copy_times
        return host_keys

    def record_binds(self) -> list[tuple[Path, str]]:
        """Record the read-only binds (start binds them again); make the shared directories."""
        binds = read_only_binds(self.cfg)
        self.bed.state["binds_ro"] = [(str(src), dst) for src, dst in binds]
        for dst, _hosts in self.cfg.shared:
            shared_dir(self.bed.run_dir, dst).mkdir(parents=True, exist_ok=True)
        self.bed.save()
        return binds

    def boot_hosts(self, binds: list[tuple[Path, str]]) -> None:
        """Boot every host, then wait for each one's systemd to come up."""
        states: dict[str, str] = {}
        with timed(self.timings, "boot_to_running_seconds"):
            for h in self.bed.hosts:
                h.boot(binds)
                self.bed.save()
            for h in self.bed.hosts:
                states[h.name] = h.wait_booted(binds, self.cfg.boot_timeout)
                self.bed.save()
        self.bed.state["boot_states"] = states

    def update_apt_lists(self) -> None:
        # like a host installed from this mirror: apt lists present. An empty lists dir with a fresh
        # mtime makes Ansible's apt module (cache_valid_time) skip the update and find no package.
        with timed(self.timings, "apt_update_seconds"):
            for h in self.bed.hosts:
                self.bed.exec(h.name, ["apt-get", "-q", "update"], timeout=300)

    def wait_for_ssh(self, key: Path, host_keys: HostKeys) -> None:
        """Write the control node's ssh files (hosts.json, inventory...), then wait for ssh to each host."""
        sshmod.write_client_files(self.bed.run_dir, self.bridge_ns, key, host_keys)
        with timed(self.timings, "ssh_ready_seconds"):
            for h in self.bed.hosts:
                self.bed.wait_ssh(h.name, timeout=60)
