"""munged, slurmctld and slurmd started from the kit without systemd (each daemonizes itself, as
the local cluster's standalone start does), waited for, and stopped."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

MUNGE_KEY_BYTES = 1024
CGROUP_ROOT = Path("/sys/fs/cgroup")
#: Where Slurm's cgroup/v2 puts the slurmstepds when it may not ask systemd (IgnoreSystemd=yes):
#: it makes the scope below this slice but not the slice, which systemd makes at boot.
SYSTEM_SLICE = CGROUP_ROOT / "system.slice"


@dataclass
class Layout:
    """Where the kit and this run's files are."""

    kit_root: Path   # the unpacked root.tar.gz: sbin/, bin/, lib/
    work: Path       # this run's directory

    @property
    def munge_dir(self) -> Path:
        return self.work / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge_dir / "munge.socket.2"

    @property
    def conf_dir(self) -> Path:
        return self.work / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.conf_dir / "slurm.conf"

    @property
    def log_dir(self) -> Path:
        return self.work / "log"

    def sbin(self, name: str) -> str:
        return str(self.kit_root / "sbin" / name)

    def env(self) -> dict[str, str]:
        """The daemons' and client commands' environment: the kit's programs first on PATH."""
        path = f"{self.kit_root / 'bin'}:{self.kit_root / 'sbin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return {**os.environ, "PATH": path, "SLURM_CONF": str(self.slurm_conf)}


def run(layout: Layout, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=layout.env(), check=False)


def start_munge(layout: Layout) -> str | None:
    """A new key (0600, never printed; kept on a restart) and munged on the run's own socket; None or why not."""
    layout.munge_dir.mkdir(mode=0o755, exist_ok=True)
    key = layout.munge_dir / "munge.key"
    if not key.exists():  # a restart (the fallback without cgroups) keeps the run's key
        descriptor = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(secrets.token_bytes(MUNGE_KEY_BYTES))
    done = run(layout, [
        layout.sbin("munged"), "--force", f"--key-file={key}", f"--socket={layout.munge_socket}",
        f"--pid-file={layout.munge_dir / 'munged.pid'}", f"--log-file={layout.log_dir / 'munged.log'}",
        f"--seed-file={layout.munge_dir / 'munged.seed'}",
    ])  # fmt: skip
    if done.returncode != 0:
        return f"munged exited {done.returncode}: {(done.stderr or done.stdout).strip()[-400:]}"
    check = run(layout, ["sh", "-c", f"munge -n -S {layout.munge_socket} | unmunge -S {layout.munge_socket}"])
    return None if check.returncode == 0 else f"munge -n | unmunge failed: {check.stderr.strip()[-300:]}"


#: Where the proof's daemons start: as systemd's Delegate=yes would give them, a cgroup of their
#: own below the slice with every controller (Slurm reads its controllers from slurmd's cgroup).
PROOF_SCOPE = SYSTEM_SLICE / "cluster-gpu-proof.scope"


def make_system_slice() -> bool:
    """The slice systemd would have made, on a cgroup v2 machine without it, its controllers
    enabled, and this process moved into PROOF_SCOPE (the daemons it starts inherit it); True
    if the slice was made here."""
    if not (CGROUP_ROOT / "cgroup.controllers").is_file():
        return False
    made = not SYSTEM_SLICE.exists()
    SYSTEM_SLICE.mkdir(exist_ok=True)
    controllers = (SYSTEM_SLICE / "cgroup.controllers").read_text().split()
    (SYSTEM_SLICE / "cgroup.subtree_control").write_text(" ".join(f"+{name}" for name in controllers))
    PROOF_SCOPE.mkdir(exist_ok=True)
    (PROOF_SCOPE / "cgroup.procs").write_text(str(os.getpid()))
    return made


def leave_proof_scope(original: str) -> None:
    """Move this process back to its cgroup (``/proc/self/cgroup``'s path at start)."""
    try:
        (CGROUP_ROOT / original.lstrip("/") / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        pass


def swap_accounting() -> bool:
    """Whether the memory controller accounts swap below the slice (``memory.swap.max``)."""
    return (SYSTEM_SLICE / "memory.swap.max").exists() or not (CGROUP_ROOT / "cgroup.controllers").is_file()


def own_cgroup() -> str:
    """This process's cgroup v2 path (``0::/path``), "/" where there is none."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    return next((line[3:] for line in lines if line.startswith("0::")), "/")


def remove_proof_scope() -> None:
    for directory in sorted(PROOF_SCOPE.glob("**/"), key=lambda p: len(p.parts), reverse=True):
        _rmdir(directory)


def remove_system_slice() -> None:
    """Remove the slice (and Slurm's scopes in it) once no process is left in them."""
    for directory in sorted(SYSTEM_SLICE.glob("*/**/"), key=lambda p: len(p.parts), reverse=True):
        _rmdir(directory)
    _rmdir(SYSTEM_SLICE)


def _rmdir(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


def last_errors(path: Path, count: int = 3) -> str:
    """The last ``error:`` lines of a daemon's log, for a start that failed."""
    lines = [line for line in log_tail(path, 50_000).splitlines() if "error:" in line]
    return " | ".join(line.split("error:", 1)[1].strip() for line in lines[-count:])


def start_slurm(layout: Layout, node: str) -> str | None:
    """slurmctld, then slurmd for ``node`` with the kit's slurmstepd; None or why not."""
    logs = {"slurmctld": layout.log_dir / "slurmctld.log", "slurmd": layout.log_dir / f"slurmd-{node}.log"}
    for argv in (
        [layout.sbin("slurmctld"), "-f", str(layout.slurm_conf)],
        [layout.sbin("slurmd"), "-f", str(layout.slurm_conf), "-N", node, "-d", layout.sbin("slurmstepd")],
    ):
        done = run(layout, argv)
        if done.returncode != 0:
            name = Path(argv[0]).name
            said = (done.stderr or done.stdout).strip()[-300:] or last_errors(logs[name])
            return f"{name} exited {done.returncode}: {said}"
    return None


def node_state(layout: Layout, node: str) -> str:
    done = run(layout, ["scontrol", "show", "node", node, "--oneliner"], timeout=20)
    for pair in done.stdout.split():
        if pair.startswith("State="):
            return pair.split("=", 1)[1]
    return f"unknown ({(done.stderr or done.stdout).strip()[-200:]})"


def wait_idle(layout: Layout, node: str, timeout: float = 60) -> str:
    """The node's state once it is IDLE, or the last one seen when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    state = node_state(layout, node)
    while not state.startswith("IDLE") and time.monotonic() < deadline:
        time.sleep(1)
        state = node_state(layout, node)
    return state


def _pids(layout: Layout) -> list[int]:
    """The pids of daemons started from this kit (their executable lies in the kit)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            exe = os.readlink(proc / "exe")
        except OSError:
            continue
        if exe.startswith(str(layout.kit_root) + "/"):
            pids.append(int(proc.name))
    return pids


def stop_all(layout: Layout, timeout: float = 20) -> list[int]:
    """SIGTERM every process of the kit, then SIGKILL what is left; returns the pids killed hard."""
    for pid in _pids(layout):
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pids(layout) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = _pids(layout)
    for pid in left:
        _signal(pid, signal.SIGKILL)
    return left


def _signal(pid: int, number: signal.Signals) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def log_tail(path: Path, max_bytes: int = 200_000) -> str:
    if not path.is_file():
        return ""
    data = path.read_bytes()
    return data[-max_bytes:].decode(errors="replace")
