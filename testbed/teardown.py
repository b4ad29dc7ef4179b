"""The steps of ``Testbed.down``: stop the hosts, then remove what ``up`` made, as recorded."""

from __future__ import annotations

from . import cgroups
from . import host as hostmod
from . import network as net
from . import rootfs as rfs
from . import ssh as sshmod
from .proc import TestbedError
from .state import HostState, RecordedBed, bridge_ns_name

# what up writes into the run dir besides state.json
CLIENT_FILES = ("id_ed25519", "id_ed25519.pub", "known_hosts", "ssh_config", "inventory.yml", "hosts.json")


def tear_down(bed: RecordedBed) -> list[str]:
    """Remove everything ``bed`` records (its lock held by the caller); return what was done.
    Whatever up left half-made goes too, and a second call finds nothing to do."""
    done: list[str] = []
    closed = sshmod.close_masters(bed.run_dir)
    if closed:
        done.append(f"closed {len(closed)} ssh control masters")
    done += stop_hosts(bed)
    for h in bed.hosts:
        done += remove_host(h)
    done += remove_bridge(bed)
    done += remove_run_files(bed)
    return done


def stop_hosts(bed: RecordedBed) -> list[str]:
    """Power off every host still running, all at once, then wait for each."""
    done: list[str] = []
    live = []
    for h in bed.hosts:
        r = h.running
        if r is not None and r.any_alive():
            hostmod.request_poweroff(r)
            live.append((h, r))
    for h, r in live:
        hostmod.stop(h.name, r, requested=True)
        done.append(f"stopped {h.name}")
    for h in bed.hosts:
        if h.running is not None:
            h.running = None
            bed.save()
    return done


def remove_host(h: HostState) -> list[str]:
    """Remove a stopped host's root, network namespace and cgroups."""
    done: list[str] = []
    if h.host_dir.exists():
        rfs.remove_host_root(h.host_dir)
        done.append(f"removed {h.host_dir}")
    if net.netns_exists(h.netns):
        net.del_netns(h.netns)
        done.append(f"deleted netns {h.netns}")
    if any(c.exists() for c in h.cgroups):
        left = cgroups.remove(h.cgroups)
        if left:
            raise TestbedError(f"cgroups still busy: {left}")
        done.append(f"removed cgroups of {h.name}")
    return done


def remove_bridge(bed: RecordedBed) -> list[str]:
    name = bed.state.get("name")
    if not name:
        return []
    bridge_ns = bed.state.get("bridge_ns") or bridge_ns_name(name)
    if not net.netns_exists(bridge_ns):
        return []
    net.del_netns(bridge_ns)
    return [f"deleted netns {bridge_ns}"]


def remove_run_files(bed: RecordedBed) -> list[str]:
    """Remove the hosts' and shared directories, the ssh files and, last, state.json."""
    done: list[str] = []
    for sub in ("hosts", "shared"):
        if (bed.run_dir / sub).exists():
            rfs.safe_rmtree(bed.run_dir / sub)
            if sub == "shared":
                done.append("removed the shared directories")
    for f in CLIENT_FILES:
        path = bed.run_dir / f
        if path.exists():
            path.unlink()
    if bed.state_file.exists():
        bed.state_file.unlink()
    bed.state = {}
    return done
