"""What the machine has: GPUs by ``nvidia-smi``, CPUs and memory by the kit's ``slurmd -C``, the
Python that runs the training checks, and whether Slurm can use cgroups here."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

GPU_QUERY = "index,name,uuid,memory.total,driver_version"
#: What the training checks import, each named when missing.
TRAINING_MODULES = ("torch", "numpy")
PYTHON_PROBE = """
import json, importlib, sys
found, missing = {}, []
for name in sys.argv[1:]:
    try:
        found[name] = getattr(importlib.import_module(name), "__version__", "?")
    except Exception as error:
        missing.append(f"{name} ({type(error).__name__}: {error})")
cuda = {}
if "torch" in found:
    import torch
    cuda = {"available": torch.cuda.is_available(), "devices": torch.cuda.device_count(),
            "cuda": torch.version.cuda}
print(json.dumps({"python": sys.version.split()[0], "found": found, "missing": missing, "cuda": cuda}))
"""


@dataclass
class Gpu:
    index: int
    name: str
    uuid: str
    memory_mib: int
    driver: str


@dataclass
class Cpus:
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mb: int


@dataclass
class PythonFacts:
    path: str
    version: str = "?"
    found: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    cuda: dict[str, object] = field(default_factory=dict)


def run(argv: list[str], timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def gpus() -> list[Gpu]:
    """The GPUs ``nvidia-smi`` lists; [] when it is missing or fails."""
    try:
        done = run(["nvidia-smi", f"--query-gpu={GPU_QUERY}", "--format=csv,noheader,nounits"])
    except FileNotFoundError:
        return []
    if done.returncode != 0:
        return []
    found = []
    for line in done.stdout.strip().splitlines():
        index, name, uuid, memory, driver = (cell.strip() for cell in line.split(","))
        found.append(Gpu(int(index), name, uuid, int(float(memory)), driver))
    return found


def listed_gpu_count() -> int:
    """How many GPUs ``nvidia-smi -L`` lists (the count the autodetection must reach)."""
    try:
        done = run(["nvidia-smi", "-L"])
    except FileNotFoundError:
        return 0
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))


def gpu_type(name: str) -> str:
    """``NVIDIA H200`` -> ``h200``, ``NVIDIA H100 80GB HBM3`` -> ``h100``: the word after the vendor,
    a substring of the type Slurm's NVML plugin reports (docs/gpu.md)."""
    words = [word for word in re.split(r"[\s-]+", name) if word.upper() not in ("NVIDIA", "TESLA")]
    return re.sub(r"[^a-z0-9]", "", (words[0] if words else name).lower()) or "gpu"


def cpus(slurmd: Path) -> Cpus:
    """The layout the kit's ``slurmd -C`` reads from the machine (hwloc), memory 95 % of it."""
    done = run([str(slurmd), "-C"])
    values = dict(re.findall(r"(\w+)=(\S+)", done.stdout))
    sockets = int(values.get("SocketsPerBoard", "1")) * int(values.get("Boards", "1"))
    return Cpus(
        sockets=sockets,
        cores_per_socket=int(values.get("CoresPerSocket", "1")),
        threads_per_core=int(values.get("ThreadsPerCore", "1")),
        real_memory_mb=int(int(values.get("RealMemory", "1024")) * 0.95),
    )


def python_facts(python: str) -> PythonFacts:
    facts = PythonFacts(python)
    try:
        done = run([python, "-c", PYTHON_PROBE, *TRAINING_MODULES], timeout=120)
    except FileNotFoundError:
        facts.missing = [f"the Python itself ({python} not found)"]
        return facts
    if done.returncode != 0:
        facts.missing = [f"{python} failed: {done.stderr.strip()[-300:]}"]
        return facts
    data = json.loads(done.stdout.strip().splitlines()[-1])
    facts.version, facts.found, facts.missing, facts.cuda = (
        data["python"], data["found"], data["missing"], data["cuda"])
    return facts


def cgroup_v2_writable(root: Path = Path("/sys/fs/cgroup")) -> str | None:
    """None when Slurm's cgroup/v2 can work here, else why not."""
    if not (root / "cgroup.controllers").is_file():
        return f"{root} is not a cgroup v2 hierarchy"
    if not os.access(root / "cgroup.subtree_control", os.W_OK) or not os.access(root, os.W_OK):
        return f"{root} is not writable (cgroups not delegated to this machine's root)"
    wanted = {"cpuset", "memory"}
    have = set((root / "cgroup.controllers").read_text().split())
    if not wanted <= have:
        return f"{root} lacks the controllers {sorted(wanted - have)}"
    return None


def unresolvable(node: str) -> str | None:
    """None when Slurm can resolve ``node`` and listen here, else why not. Slurm asks getaddrinfo
    with AI_ADDRCONFIG, which answers nothing (not even the wildcard address slurmctld listens
    on) on a machine whose only interface is loopback."""
    for host, flags in ((node, socket.AI_ADDRCONFIG), (None, socket.AI_ADDRCONFIG | socket.AI_PASSIVE)):
        try:
            socket.getaddrinfo(host, "6817", socket.AF_UNSPEC, socket.SOCK_STREAM, 0, flags)
        except socket.gaierror as error:
            what = node if host else "the address to listen on"
            return (f"{what} does not resolve as Slurm asks (getaddrinfo with AI_ADDRCONFIG: {error.strerror}): "
                    "Slurm needs the hostname in /etc/hosts and an interface with an address other than "
                    "loopback (a machine with loopback alone has none), e.g. a dummy interface: `ip link add "
                    "proof0 type dummy && ip addr add 192.0.2.1/24 dev proof0 && ip link set proof0 up`")
    return None


def init_system() -> str:
    try:
        return Path("/proc/1/comm").read_text().strip()
    except OSError:
        return "?"
