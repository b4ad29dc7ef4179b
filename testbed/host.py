"""One test host: rootfs configuration, boot under systemd-nspawn, stop."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from . import cgroups
from .network import netns_path
from .proc import (
    TestbedError,
    descendants,
    ns_pids,
    proc_starttime,
    reap,
    run,
    same_process,
)

log = logging.getLogger("testbed")

CGROUP_UNIT_NAME = "testbed-cgroup-rw.service"

# nspawn mounts the cgroup v1 controller hierarchies read-only inside the
# container; slurmd (proctrack/task cgroup) must create cgroups in them.
# Ordered before sysinit.target so it runs before every ordinary service
# (slurmd@*.service included), whatever their names. A remount can fail while
# the boot is still busy (seen once in a CI run: slurmd on that host then found
# freezer read-only), so it is tried again until no cgroup mount is read-only.
# ($name stays inside one shell word: systemd expands only ${name} there.)
CGROUP_UNIT = """\
[Unit]
Description=Remount cgroup v1 controllers read-write (test bed)
DefaultDependencies=no
After=local-fs.target
Before=sysinit.target shutdown.target
Conflicts=shutdown.target
ConditionVirtualization=container

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for try in 1 2 3 4 5 6 7 8 9 10; do \
left=no; \
while read -r _dev mp fstype opts _rest; do \
[ "$fstype" = cgroup ] || continue; \
case ",$opts," in *,ro,*) mount -o remount,bind,rw "$mp" || left=yes ;; esac; \
done < /proc/self/mounts; \
[ "$left" = no ] && ! grep -q " cgroup ro[, ]" /proc/self/mounts && exit 0; \
sleep 1; \
done; \
grep " cgroup ro[, ]" /proc/self/mounts >&2; exit 1'

[Install]
WantedBy=sysinit.target
"""

SSHD_CONFIG = """\
# written by the test bed
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
"""


# Under the host's /etc; roles/nvml_emulator's nvml_emulator_test_marker names the same file.
TESTBED_MARKER = "cluster-cli/testbed-host"


@dataclass
class HostFiles:
    """What configure_root writes into a host's rootfs."""

    name: str
    address: str
    etc_hosts: str
    authorized_key: str
    host_key_dir: Path  # holds ssh_host_ed25519_key(.pub) made on the control node
    mirror: bool  # sources.list points at the bind-mounted /mirror
    wheelhouse: bool = False  # the mirror has wheels/: pip uses only it


def configure_root(root: Path, files: HostFiles) -> None:
    """Make ``root`` into host ``files.name``. Idempotent."""
    _write_identity(root, files)
    _write_ssh(root, files)
    _write_package_sources(root, files)
    _write_systemd_settings(root)


def _write_identity(root: Path, files: HostFiles) -> None:
    """Host name, /etc/hosts, a machine id of its own, no DNS, nothing to mount."""
    etc = root / "etc"
    (etc / "hostname").write_text(files.name + "\n")
    (etc / "hosts").write_text(files.etc_hosts)
    (etc / "machine-id").write_text(uuid.uuid4().hex + "\n")
    # no DNS: names come from /etc/hosts, there is no route out
    resolv = etc / "resolv.conf"
    if resolv.is_symlink() or resolv.exists():
        resolv.unlink()
    resolv.write_text("# test bed: no DNS, names are in /etc/hosts\n")
    (etc / "fstab").write_text("# test bed: nothing to mount\n")
    # what roles with test-only stand-ins (roles/nvml_emulator) require before they install anything
    (etc / "cluster-cli").mkdir(exist_ok=True)
    (etc / TESTBED_MARKER).write_text("# a cluster-cli test bed host (testbed/host.py)\n")


def _write_ssh(root: Path, files: HostFiles) -> None:
    """SSH: per-host key, root key login only."""
    ssh = root / "etc/ssh"
    for old in ssh.glob("ssh_host_*"):
        old.unlink()
    for suffix, mode in (("", 0o600), (".pub", 0o644)):
        src = files.host_key_dir / f"ssh_host_ed25519_key{suffix}"
        dst = ssh / f"ssh_host_ed25519_key{suffix}"
        dst.write_bytes(src.read_bytes())
        os.chmod(dst, mode)
    (ssh / "sshd_config.d").mkdir(exist_ok=True)
    (ssh / "sshd_config.d" / "testbed.conf").write_text(SSHD_CONFIG)
    dot_ssh = root / "root/.ssh"
    dot_ssh.mkdir(mode=0o700, exist_ok=True)
    os.chmod(dot_ssh, 0o700)
    ak = dot_ssh / "authorized_keys"
    ak.write_text(files.authorized_key.strip() + "\n")
    os.chmod(ak, 0o600)


def _write_package_sources(root: Path, files: HostFiles) -> None:
    """apt: ONLY the local mirror (the host has no route out); pip: its wheelhouse or nothing."""
    etc = root / "etc"
    apt = etc / "apt"
    for f in (apt / "sources.list.d").glob("*"):
        f.unlink()
    if files.mirror:
        (apt / "sources.list").write_text(
            "# test bed: local mirror, bind-mounted read-only\n"
            "deb [trusted=yes] file:/mirror ./\n"
        )
    else:
        (apt / "sources.list").write_text("# test bed: no mirror given\n")
    # pip: like apt, only the mirror (its wheelhouse), no index
    pip_conf = etc / "pip.conf"
    if files.wheelhouse:
        pip_conf.write_text("# test bed: the mirror's wheelhouse only\n[global]\n"
                            "no-index = true\nfind-links = /mirror/wheels\n")
    elif pip_conf.exists():
        pip_conf.unlink()
    (apt / "apt.conf.d").mkdir(exist_ok=True)
    (apt / "apt.conf.d" / "90testbed").write_text(
        'APT::Install-Recommends "false";\nAcquire::Languages "none";\n'
    )


def _write_systemd_settings(root: Path) -> None:
    """Units and settings for systemd in a container."""
    etc = root / "etc"
    # cgroup controllers rw before any service starts
    unit_dir = etc / "systemd/system"
    (unit_dir / CGROUP_UNIT_NAME).write_text(CGROUP_UNIT)
    wants = unit_dir / "sysinit.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / CGROUP_UNIT_NAME
    if not link.is_symlink():
        link.symlink_to(f"/etc/systemd/system/{CGROUP_UNIT_NAME}")
    # sshd must start at boot (the package enables it; make sure)
    mu_wants = unit_dir / "multi-user.target.wants"
    mu_wants.mkdir(parents=True, exist_ok=True)
    ssh_link = mu_wants / "ssh.service"
    if not ssh_link.is_symlink() and (root / "lib/systemd/system/ssh.service").exists():
        ssh_link.symlink_to("/lib/systemd/system/ssh.service")
    # bounded shutdown: on trixie the root user manager (user@0, started by
    # pam_systemd at the first SSH login) can hang for the default 90 s at
    # poweroff ("Job user@0.service/stop running")
    conf_d = etc / "systemd/system.conf.d"
    conf_d.mkdir(parents=True, exist_ok=True)
    (conf_d / "testbed.conf").write_text("[Manager]\nDefaultTimeoutStopSec=15s\n")
    user_d = unit_dir / "user@.service.d"
    user_d.mkdir(parents=True, exist_ok=True)
    (user_d / "testbed.conf").write_text("[Service]\nTimeoutStopSec=5s\n")
    # units that only fail inside a container: no module loading (trixie runs
    # systemd-modules-load with --capability=all and it fails), no console; and
    # e2scrub_reap (ext4 snapshots on LVM: a host has none), which a CI run found
    # failed at boot with status=219/CGROUP (2026-11-28), failing the bed's check
    # that no unit has failed
    for unit in ("systemd-networkd-wait-online.service", "console-getty.service",
                 "systemd-modules-load.service", "e2scrub_reap.service"):
        masked = unit_dir / unit
        if not masked.exists() and not masked.is_symlink():
            masked.symlink_to("/dev/null")


# ---------------------------------------------------------------- boot

@dataclass
class Running:
    nspawn_pid: int
    nspawn_start: int
    leader_pid: int
    leader_start: int

    def leader_alive(self) -> bool:
        """The container's init (the host's systemd) is still the process that booted."""
        return same_process(self.leader_pid, self.leader_start)

    def any_alive(self) -> bool:
        """nspawn or the container's init still runs: there is something to stop."""
        return self.leader_alive() or same_process(self.nspawn_pid, self.nspawn_start)


def nspawn_argv(
    machine: str, hostname: str, root: Path, netns: str, binds_ro: list[tuple[Path, str]],
    binds_rw: list[tuple[Path, str]] | None = None, fuse: bool = False,
) -> list[str]:
    # nspawn is started inside the host's network namespace as well as told
    # to use it: with --network-namespace-path alone the container's /sys is
    # mounted from the root namespace and /sys/class/net lists the control
    # node's interfaces (wrong MACs and names in Ansible facts).
    argv = [
        "nsenter", f"--net={netns_path(netns)}",
        "systemd-nspawn",
        "-D", str(root),
        "-b",
        f"--machine={machine}",
        f"--hostname={hostname}",
        "--register=no",
        "--keep-unit",
        f"--network-namespace-path={netns_path(netns)}",
        "--capability=all",
        # The kernel keyring's system calls, which nspawn's own filter denies (the keyring was not
        # namespaced before Linux 5.3) and a Debian host outside a container has: runc makes a session
        # keyring for each container it starts ("unable to join session keyring: unable to create
        # session key: operation not permitted" without them: the smoke suite's container check).
        "--system-call-filter=@keyring",
        "--console=read-only",
        "--link-journal=no",
        "--resolv-conf=off",
        "--timezone=off",
    ]
    for src, dst in binds_ro:
        argv.append(f"--bind-ro={src}:{dst}")
    for src, dst in binds_rw or []:
        argv.append(f"--bind={src}:{dst}")
    if fuse:
        # the device node only: with --keep-unit and --register=no nspawn makes no scope and sets no
        # device cgroup rules, so the bound node is usable as it is (sshfs mounts inside).
        argv.append("--bind=/dev/fuse")
    return argv


def boot(
    machine: str,
    name: str,
    root: Path,
    netns: str,
    console_log: Path,
    binds_ro: list[tuple[Path, str]],
    cgroup_dirs: list[Path],
    timeout: float = 30.0,
    binds_rw: list[tuple[Path, str]] | None = None,
    fuse: bool = False,
) -> Running:
    """Start systemd-nspawn in its own session and cgroups, its console to
    ``console_log``; return once the container's PID 1 exists."""
    argv = nspawn_argv(machine, name, root, netns, binds_ro, binds_rw, fuse)
    cgroups.create(cgroup_dirs)
    with open(console_log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # setsid: survives our exit, no controlling tty
            close_fds=True,
            preexec_fn=lambda: cgroups.attach_self(cgroup_dirs),  # noqa: PLW1509
        )
    deadline = time.monotonic() + timeout
    nspawn_start = proc_starttime(proc.pid)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise TestbedError(
                f"systemd-nspawn for {name} exited with {proc.returncode}; "
                f"console log {console_log}:\n{tail(console_log)}"
            )
        leader = find_leader(proc.pid)
        if leader is not None:
            start = proc_starttime(leader)
            if start is not None and nspawn_start is not None:
                return Running(proc.pid, nspawn_start, leader, start)
        time.sleep(0.05)
    raise TestbedError(f"no container PID 1 for {name} after {timeout}s")


def find_leader(nspawn_pid: int) -> int | None:
    """The container's init: the descendant of nspawn that is PID 1 in its pid namespace."""
    for pid in descendants(nspawn_pid):
        nsp = ns_pids(pid)
        if len(nsp) >= 2 and nsp[-1] == 1:
            return pid
    return None


#: The environment of a command run in a host by nsenter. nsenter passes its
#: own environment through: the control node's PIP_FIND_LINKS, PATH (pyenv
#: shims), proxies... would leak into the host.
HOST_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME=/root", "LANG=C.UTF-8", "USER=root", "LOGNAME=root")


def nsenter_argv(leader_pid: int, argv: list[str]) -> list[str]:
    return ["nsenter", "-t", str(leader_pid), "-a", "/usr/bin/env", "-i", *HOST_ENV, *argv]


def system_state(leader_pid: int) -> str:
    cp = run(nsenter_argv(leader_pid, ["systemctl", "is-system-running"]), check=False,
             timeout=30)
    return (cp.stdout.strip() or cp.stderr.strip() or "unknown").splitlines()[-1]


def wait_running(name: str, r: Running, console_log: Path, timeout: float = 120.0) -> str:
    deadline = time.monotonic() + timeout
    state = "unknown"
    while time.monotonic() < deadline:
        if not same_process(r.leader_pid, r.leader_start):
            raise TestbedError(f"{name}: container died during boot:\n{tail(console_log)}")
        state = system_state(r.leader_pid)
        if state in ("running", "degraded"):
            _require_writable_cgroups(name, r)
            return state
        time.sleep(0.2)
    raise TestbedError(
        f"{name}: systemd still {state!r} after {timeout}s:\n{tail(console_log)}"
    )


class CgroupUnitFailed(TestbedError):
    """The boot's cgroup remount unit did not succeed (a fresh boot usually does)."""


def _require_writable_cgroups(name: str, r: Running) -> None:
    """Fail the boot here, not minutes later when slurmd finds a read-only controller."""
    active = run(nsenter_argv(r.leader_pid, ["systemctl", "is-active", CGROUP_UNIT_NAME]), check=False, timeout=30)
    if active.stdout.strip() != "active":
        status = run(nsenter_argv(r.leader_pid, ["systemctl", "status", "--no-pager", CGROUP_UNIT_NAME]),
                     check=False, timeout=30)
        raise CgroupUnitFailed(f"{name}: {CGROUP_UNIT_NAME} is {active.stdout.strip() or 'unknown'}:\n{status.stdout}")


def request_poweroff(r: Running) -> None:
    """Ask the container's systemd to power off (returns at once)."""
    if same_process(r.leader_pid, r.leader_start):
        run(nsenter_argv(r.leader_pid, ["systemctl", "poweroff", "--no-block"]),
            check=False, timeout=30)


def stop(name: str, r: Running, timeout: float = 45.0, requested: bool = False) -> None:
    """Power the container off; kill it (by the recorded pids only) if it hangs."""
    if not requested:
        request_poweroff(r)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap(r.nspawn_pid)
        if not same_process(r.nspawn_pid, r.nspawn_start) and not same_process(
            r.leader_pid, r.leader_start
        ):
            return
        time.sleep(0.1)
    log.warning("%s did not power off in %.0fs: killing it", name, timeout)
    for pid, start in ((r.leader_pid, r.leader_start), (r.nspawn_pid, r.nspawn_start)):
        if same_process(pid, start):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reap(r.nspawn_pid)
        if not same_process(r.nspawn_pid, r.nspawn_start):
            return
        time.sleep(0.1)
    raise TestbedError(f"{name}: systemd-nspawn (pid {r.nspawn_pid}) would not die")


def tail(path: Path, lines: int = 30) -> str:
    try:
        data = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no console log)"
    return "\n".join(data[-lines:])
