"""The GPU proof rehearsed on this machine (issue 38, docs/gpu-validation.md#the-rehearsal).

The kit made here (bookworm) runs in a systemd-nspawn root of another release with no network
and no systemd as init: a trixie root, a virtual environment of this machine's own Python holding
CPU torch standing in for the GPU machine's Python (bind-mounted: nothing is installed into the
root), the NVML emulator and fake device files standing in for the driver. A bullseye root, whose
C library is older than the kit's programs need, rehearses the refusal of the first step.

    python tests/gpu_kit/rehearsal.py trixie OUT_DIR     # or: bullseye OUT_DIR

The roots and the venv are cached under CACHE (CLUSTER_CLI_REHEARSAL_CACHE, default
/var/cache/cluster-cli/gpu-rehearsal): minutes the first time, none after.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
from testbed.rootfs import build_base

CACHE = Path(os.environ.get("CLUSTER_CLI_REHEARSAL_CACHE", "/var/cache/cluster-cli/gpu-rehearsal"))
EMULATOR_SOURCE = REPO / "roles" / "nvml_emulator" / "files"
#: What the trixie root adds to minbase: python3 (the jobs' `python3`), iproute2 (the address
#: below), the libraries this machine's Python loads for torch (ctypes, lzma, bz2, ssl ...).
TRIXIE_PACKAGES = ("python3", "iproute2", "libffi8", "libbz2-1.0", "liblzma5", "zlib1g", "libssl3t64", "libsqlite3-0",
                   "libexpat1", "libuuid1", "libreadline8t64", "libncursesw6", "libstdc++6")
TORCH_REQUIREMENTS = ("torch==2.13.0+cpu", "numpy==2.4.6")
GPUS = 2
EMULATOR_CONF = "driver_version = 580.159.04\n" + "".join(
    f"[gpu {n}]\nname = NVIDIA H200\nmemory_mib = 143771\npci_bus_id = 00000000:{0x18 + 0x10 * n:02X}:00.0\n"
    for n in range(GPUS)
)
#: Runs inside the root as its first process: what a driver would have installed, then the proof.
INSIDE = """
set -e
cp /rehearsal/lib/libnvidia-ml.so.1 /usr/local/lib/ && ln -sf libnvidia-ml.so.1 /usr/local/lib/libnvidia-ml.so
ldconfig
install -m 0755 /rehearsal/nvidia-smi /usr/local/bin/nvidia-smi
# this machine's Python is bind-mounted at its own path, below /root: the test user's jobs run it
chmod 0755 /root
for n in $GPU_MINORS; do mknod -m 0666 /dev/nvidia$n c 195 $n; done
echo "127.0.0.1 localhost $(hostname)" >>/etc/hosts
# An address that is not loopback, on a link to nowhere: Slurm resolves names with AI_ADDRCONFIG,
# which finds nothing on a machine with loopback alone (a GPU machine has its network interfaces).
ip addr add 192.0.2.1/24 dev host0
ip link set host0 up
exec /kit/run /out --python "$PROOF_PYTHON" --fake-gpus
"""


def trixie_root() -> Path:
    """trixie with python3 and the libraries above, cached (the test bed's debootstrap cache)."""
    return build_base(CACHE, "trixie", TRIXIE_PACKAGES).path


def bullseye_root() -> Path:
    """bullseye's minbase (glibc 2.31), cached: all the refusal needs is its shell and C library."""
    root = CACHE / "bullseye-minbase"
    if (root / "etc" / "os-release").exists():
        return root
    temp = CACHE / f".bullseye-minbase.tmp-{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir(parents=True)
    subprocess.run(["debootstrap", "--variant=minbase", "bullseye", str(temp), "http://deb.debian.org/debian"],
                   check=True, capture_output=True, timeout=1800)
    temp.rename(root)
    return root


def torch_venv() -> Path:
    """A venv of this machine's own Python (sys.base_prefix) with CPU torch, built once."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    venv = CACHE / (f"venv-py{version}-" + "-".join(r.replace("==", "") for r in TORCH_REQUIREMENTS))
    if (venv / "ready").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    base_python = Path(sys.base_prefix) / "bin" / f"python{version}"
    subprocess.run([str(base_python), "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{version}" / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(site),
                    *TORCH_REQUIREMENTS], check=True, timeout=1800)
    (venv / "ready").write_text(time.strftime("%Y-%m-%dT%H:%M:%S\n"))
    return venv


def emulator(directory: Path) -> None:
    """The NVML emulator library (built here), its configuration and the nvidia-smi stand-in."""
    (directory / "lib").mkdir(parents=True)
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-Wl,-soname,libnvidia-ml.so.1", "-o",
                    str(directory / "lib" / "libnvidia-ml.so.1"), str(EMULATOR_SOURCE / "nvml_emulator.c")],
                   check=True)
    (directory / "nvml-emulator.conf").write_text(EMULATOR_CONF)
    shutil.copy2(EMULATOR_SOURCE / "nvidia-smi", directory / "nvidia-smi")


def nspawn(root: Path, kit: Path, out: Path, command: list[str], binds_ro: list[tuple[Path, str]],
           env: dict[str, str], timeout: float) -> tuple[int, str, float]:
    """``command`` as the root's first process under systemd-nspawn: a network of its own (a veth
    link whose other end nothing configures: no route anywhere), a throw-away overlay over the
    cached root, the kit read-only at /kit, results at /out."""
    argv = ["systemd-nspawn", "-D", str(root), "--volatile=overlay", "--network-veth", "--register=no",
            "--keep-unit", "--as-pid2", "--capability=all", "--hostname=gpu-rehearsal", "--quiet",
            f"--machine=gpurehearsal{os.getpid() % 100000}",  # its own veth name beside a second run
            "--link-journal=no", "--resolv-conf=off", "--timezone=off",
            f"--bind-ro={kit}:/kit", f"--bind={out}:/out"]  # fmt: skip
    argv += [f"--bind-ro={source}:{target}" for source, target in binds_ro]
    argv += [f"--setenv={key}={value}" for key, value in env.items()]
    started = time.monotonic()
    done = subprocess.run([*argv, *command], capture_output=True, text=True, timeout=timeout, check=False)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def rehearse_trixie(kit: Path, out: Path, root: Path) -> tuple[int, str, float]:
    venv = torch_venv()
    base = Path(sys.base_prefix)
    with tempfile.TemporaryDirectory(prefix="gpu-rehearsal-") as temp:
        emulator(Path(temp))
        return nspawn(
            root, kit, out, ["/bin/sh", "-c", INSIDE],
            binds_ro=[(Path(temp), "/rehearsal"), (base, str(base)), (venv, str(venv))],
            env={"CLUSTER_CLI_NVML_EMULATOR_CONF": "/rehearsal/nvml-emulator.conf",
                 "GPU_MINORS": " ".join(str(n) for n in range(GPUS)),
                 "PROOF_PYTHON": str(venv / "bin" / "python")},
            timeout=600,
        )


def rehearse_bullseye(kit: Path, out: Path, root: Path) -> tuple[int, str, float]:
    return nspawn(root, kit, out, ["/kit/run", "/out"], binds_ro=[], env={}, timeout=120)


def main(argv: list[str]) -> int:
    which, out = argv[0], Path(argv[1])
    kit = Path(os.environ.get("GPU_KIT", REPO / ".gpu-kit"))
    out.mkdir(parents=True, exist_ok=True)
    root = trixie_root() if which == "trixie" else bullseye_root()
    rc, output, seconds = (rehearse_trixie if which == "trixie" else rehearse_bullseye)(kit, out, root)
    print(output)
    print(json.dumps({"rc": rc, "seconds": round(seconds, 1)}))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
