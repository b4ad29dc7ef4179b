"""Run Debian's ``slurmd -G`` with Slurm's own gpu_nvml.so reading the NVML emulator.

``slurmd -G`` loads the GRES configuration as slurmd does at start (AutoDetect=nvml: the gpu/nvml
plugin asks NVML), prints it and exits; no daemon stays. Everything it reads is in a private
directory: slurm.conf (SLURM_CONF, PluginDir = Debian's plugin directory plus the directory of
the built gpu_nvml.so), gres.conf, cgroup.conf. The emulator is found through LD_LIBRARY_PATH
(Debian's slurmd dlopens the unversioned libnvidia-ml.so).

    python tests/nvml/slurmd_gres.py   # prints what slurmd -G says for a few cases (root)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nvml_emu import PLUGIN_CACHE, build

SLURMD = "/usr/sbin/slurmd"
DEBIAN_PLUGIN_DIR = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
NODE = "nvmlemu1"
# Unused by slurmd -G, but slurm.conf needs them; outside 6817-6819 and 17000-17100.
CTLD_PORT, SLURMD_PORT = 28190, 28191


def slurmd_version() -> str:
    return subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "slurmd"], capture_output=True, text=True, check=False
    ).stdout.strip()


def built_plugin() -> Path | None:
    plugin = PLUGIN_CACHE / slurmd_version() / "gpu_nvml.so"
    return plugin if plugin.is_file() else None


def missing_requirement() -> str | None:
    """Why ``slurmd -G`` with the real plugin cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (slurmd)"
    if not os.access(SLURMD, os.X_OK):
        return f"needs Debian's slurmd ({SLURMD} not found)"
    if built_plugin() is None:
        return (f"no gpu_nvml.so built for slurmd {slurmd_version() or '?'} in {PLUGIN_CACHE}: "
                "run scripts/build-nvml-plugin.sh")
    return None


def gpu_sections(names: list[str], nvlinks: bool = True) -> str:
    """Emulator config: one [gpu N] per name; with nvlinks, every GPU linked once to every other."""
    sections = []
    for index, name in enumerate(names):
        lines = [f"[gpu {index}]", f"name = {name}", f"pci_bus_id = 00000000:{0x18 + 0x10 * index:02X}:00.0"]
        peers = [str(other) for other in range(len(names)) if other != index]
        if nvlinks and peers:
            lines.append("nvlink_peers = " + ",".join(peers))
        sections.append("\n".join(lines))
    return "\n".join(sections) + "\n"


@dataclass
class GresRun:
    returncode: int
    output: str

    def records(self) -> list[dict[str, str]]:
        """The GPUs slurmd keeps: its final `Gres Name=gpu Type=... File=...` lines, as dicts."""
        return [dict(re.findall(r"(\w+)=(\S*)", line[line.index("Gres Name="):]))
                for line in self.output.splitlines() if "Gres Name=gpu" in line]

    def ignored_types(self) -> list[str]:
        """Types of the detected GPUs slurmd ignores (no configured type matched them)."""
        text = self.output.split("The following autodetected GPUs are being ignored:")
        return re.findall(r"GRES\[gpu\] Type:(\S+)", text[1]) if len(text) > 1 else []


def slurm_conf(work: Path, plugin_dir: Path, node_gres: str) -> str:
    return f"""\
ClusterName=nvmlemu
SlurmctldHost=localhost
SlurmctldPort={CTLD_PORT}
SlurmdPort={SLURMD_PORT}
AuthType=auth/munge
PluginDir={DEBIAN_PLUGIN_DIR}:{plugin_dir}
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdSpoolDir={work}/spool
SlurmdPidFile={work}/slurmd.pid
StateSaveLocation={work}/state
SlurmdLogFile={work}/slurmd.log
NodeName={NODE} NodeHostname=localhost CPUs={os.cpu_count()} RealMemory=1000 Gres={node_gres}
PartitionName=emu Nodes={NODE} Default=YES
"""


def write_configs(work: Path, gpus: str | None, node_gres: str, gres_conf: str) -> None:
    plugin = built_plugin()
    assert plugin is not None
    for sub in ("spool", "state", "ns"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    (work / "slurm.conf").write_text(slurm_conf(work, plugin.parent, node_gres))
    (work / "gres.conf").write_text(gres_conf)
    (work / "cgroup.conf").write_text("CgroupPlugin=autodetect\n")
    if gpus is not None:  # None: no emulator config, NVML answers "Driver Not Loaded"
        (work / "nvml-emulator.conf").write_text(gpus)


def run_slurmd_g(work: Path, lib_dir: Path, gpus: str | None, node_gres: str,
                 gres_conf: str = "AutoDetect=nvml\n", mig_minors: str | None = None) -> GresRun:
    """``slurmd -G`` for node ``NODE`` with ``Gres=node_gres`` and the emulator config ``gpus``,
    in the mount namespace of NAMESPACE_SCRIPT; ``mig_minors`` is the driver's mig-minors file."""
    write_configs(work, gpus, node_gres, gres_conf)
    env = dict(os.environ, SLURM_CONF=str(work / "slurm.conf"), LD_LIBRARY_PATH=str(lib_dir),
               CLUSTER_CLI_NVML_EMULATOR_CONF=str(work / "nvml-emulator.conf"),
               NVML_EMU_DEV_MINORS=" ".join(str(n) for n in range((gpus or "").count("[gpu "))))
    if mig_minors is not None:
        (work / "mig-minors").write_text(mig_minors)
        env["NVML_EMU_MIG_MINORS"] = str(work / "mig-minors")
        env["NVML_EMU_CAP_MINORS"] = " ".join(re.findall(r"access (\d+)", mig_minors))
    argv = [*NAMESPACE, str(work / "ns"), SLURMD, "-G", "-N", NODE, "-f", str(work / "slurm.conf")]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
    return GresRun(done.returncode, done.stdout + done.stderr)


# What the driver provides beside NVML, for slurmd only: it runs in a mount namespace of its own
# where /dev is an overlay adding /dev/nvidiaN (195, N) and /dev/nvidia-caps/nvidia-capN
# (slurmd stats them), and /proc/driver is a tmpfs with nvidia-caps/mig-minors (MIG minor
# numbers) when given. The machine's /dev and /proc are not changed.
NAMESPACE_SCRIPT = """
set -e
scratch=$1; shift
mount -t tmpfs nvml-emulator "$scratch"
mkdir -p "$scratch/upper/nvidia-caps" "$scratch/work"
for n in $NVML_EMU_DEV_MINORS; do mknod -m 0666 "$scratch/upper/nvidia$n" c 195 "$n"; done
for n in $NVML_EMU_CAP_MINORS; do mknod -m 0444 "$scratch/upper/nvidia-caps/nvidia-cap$n" c 236 "$n"; done
mount -t overlay nvml-emulator -o "lowerdir=/dev,upperdir=$scratch/upper,workdir=$scratch/work" /dev
if [ -n "$NVML_EMU_MIG_MINORS" ]; then
  mount -t tmpfs nvml-emulator /proc/driver
  mkdir /proc/driver/nvidia-caps
  cp "$NVML_EMU_MIG_MINORS" /proc/driver/nvidia-caps/mig-minors
fi
exec "$@"
"""
NAMESPACE = ["unshare", "--mount", "--propagation", "private", "sh", "-c", NAMESPACE_SCRIPT, "sh"]

H100 = "NVIDIA H100 80GB HBM3"
# (what, the NVML names of the GPUs, slurm.conf Gres=) for the printout of main()
CASES = [
    ("4 x H100, Gres=gpu:h100:4", [H100] * 4, "gpu:h100:4"),
    ("4 x H100, Gres=gpu:h100:8", [H100] * 4, "gpu:h100:8"),
    ("4 x H100, Gres=gpu:4", [H100] * 4, "gpu:4"),
    *[(f"H100, Gres=gpu:{t}:1", [H100], f"gpu:{t}:1")
      for t in ("H100", "nvidia_h100_80gb_hbm3", "h100_80gb", "hbm3", "a100", "h100-80gb")],
    *[(f"{n}, Gres=gpu:{t}:1", [n], f"gpu:{t}:1") for n, t in (
        ("NVIDIA H200", "h200"), ("NVIDIA H200", "h20"), ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4"), ("NVIDIA A100-SXM4-80GB", "a100_sxm4"),
        ("NVIDIA L40S", "l40s"), ("NVIDIA L40S", "l40"), ("NVIDIA B200", "b200"))],
]
MIG_CONF = "[gpu 0]\nmig = on\nmig_devices = 2\n"
MIG_MINORS = ("config 1\nmonitor 2\n"
              "gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\n")


def main() -> None:
    import tempfile

    why = missing_requirement()
    if why:
        sys.exit(why)
    with tempfile.TemporaryDirectory() as tmp:
        lib_dir = Path(tmp) / "lib"
        lib_dir.mkdir()
        build(lib_dir)
        runs = [(title, run_slurmd_g(Path(tmp) / f"case{number}", lib_dir, gpu_sections(names), gres))
                for number, (title, names, gres) in enumerate(CASES)]
        runs.append(("no emulator config (no driver)", run_slurmd_g(Path(tmp) / "none", lib_dir, None, "gpu:h100:1")))
        for gres in ("gpu:2", "gpu:3g.40gb:2"):
            runs.append((f"H100 MIG on, 2 x 3g.40gb, Gres={gres}",
                         run_slurmd_g(Path(tmp) / f"mig{gres}", lib_dir, MIG_CONF, gres, mig_minors=MIG_MINORS)))
        for title, run in runs:
            print(f"=== {title}: slurmd -G exit {run.returncode}\n{run.output}")


if __name__ == "__main__":
    main()
