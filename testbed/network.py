"""Private network of a test bed: a bridge in a namespace of its own, one
namespace per host joined to it by a veth pair. Nothing is created in the
root network namespace: every link is made from inside the bridge namespace.

    /run/netns/<prefix>-br      bridge "br0" with <subnet>.1, one "vh<i>" port per host
    /run/netns/<prefix>-<host>  "eth0" (fixed MAC, <subnet>.<10+i>), peer of "vh<i>"

Commands run in a namespace with ``nsenter --net=/run/netns/X`` (never
``ip netns exec``, which remounts /sys in its own mount namespace).
"""

from __future__ import annotations

import hashlib
import ipaddress
from pathlib import Path

from .proc import TestbedError, run

NETNS_DIR = Path("/run/netns")


def netns_path(name: str) -> Path:
    return NETNS_DIR / name


def netns_exists(name: str) -> bool:
    return netns_path(name).exists()


def in_ns(ns: str, argv: list[str]) -> list[str]:
    return ["nsenter", f"--net={netns_path(ns)}", *argv]


def fixed_mac(testbed: str, host: str) -> str:
    """A stable locally administered unicast MAC for ``host`` of ``testbed``.

    Recreating a host with the same address and MAC avoids stale ARP
    entries in the bridge namespace (SSH would hang on a stale neighbour).
    """
    digest = hashlib.sha256(f"{testbed}/{host}".encode()).digest()
    return "02:" + ":".join(f"{b:02x}" for b in digest[:5])


def host_addresses(subnet: str, count: int, first: int = 11) -> tuple[str, list[str], int]:
    """(bridge address, host addresses, prefix length) within ``subnet``."""
    net = ipaddress.ip_network(subnet, strict=True)
    if net.version != 4:
        raise TestbedError("only IPv4 subnets are supported")
    hosts = list(net.hosts())
    if first - 1 + count > len(hosts):
        raise TestbedError(f"subnet {subnet} too small for {count} hosts")
    bridge = str(hosts[0])
    return bridge, [str(hosts[first - 1 + i]) for i in range(count)], net.prefixlen


def add_netns(name: str) -> None:
    if not netns_exists(name):
        run(["ip", "netns", "add", name])
    run(in_ns(name, ["ip", "link", "set", "lo", "up"]))


def del_netns(name: str) -> None:
    if netns_exists(name):
        run(["ip", "netns", "delete", name], check=False)
    if netns_exists(name):  # a stale file left by a crash
        run(["umount", str(netns_path(name))], check=False)
        try:
            netns_path(name).unlink()
        except FileNotFoundError:
            pass
    if netns_exists(name):
        raise TestbedError(f"could not delete network namespace {name}")


def setup_bridge(bridge_ns: str, address: str, prefixlen: int) -> None:
    add_netns(bridge_ns)
    cp = run(in_ns(bridge_ns, ["ip", "-o", "link", "show", "br0"]), check=False)
    if cp.returncode != 0:
        run(in_ns(bridge_ns, ["ip", "link", "add", "br0", "type", "bridge"]))
    run(in_ns(bridge_ns, ["ip", "addr", "replace", f"{address}/{prefixlen}", "dev", "br0"]))
    run(in_ns(bridge_ns, ["ip", "link", "set", "br0", "up"]))


def setup_host_link(
    bridge_ns: str, host_ns: str, index: int, mac: str, address: str, prefixlen: int
) -> None:
    """Create the host's namespace and its veth into the bridge."""
    add_netns(host_ns)
    port = f"vh{index}"
    # a left-over port from a crashed run: remove it (its peer goes with it)
    run(in_ns(bridge_ns, ["ip", "link", "del", port]), check=False)
    run(in_ns(host_ns, ["ip", "link", "del", "eth0"]), check=False)
    # created inside the bridge namespace, the peer moved straight into the
    # host namespace: the pair never appears in the root namespace
    run(
        in_ns(
            bridge_ns,
            ["ip", "link", "add", port, "type", "veth", "peer", "name", "eth0",
             "netns", str(netns_path(host_ns))],
        )
    )
    run(in_ns(bridge_ns, ["ip", "link", "set", port, "master", "br0", "up"]))
    run(in_ns(host_ns, ["ip", "link", "set", "eth0", "address", mac]))
    run(in_ns(host_ns, ["ip", "addr", "replace", f"{address}/{prefixlen}", "dev", "eth0"]))
    run(in_ns(host_ns, ["ip", "link", "set", "eth0", "up"]))
    # forget any neighbour entry of a previous incarnation of this address
    run(in_ns(bridge_ns, ["ip", "neigh", "flush", "to", address]), check=False)
