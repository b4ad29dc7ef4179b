"""``cluster-cli gpu-kit``: the GPU proof in one directory that a machine with no network, no apt
and maybe no Debian runs (docs/gpu-validation.md).

The kit holds Slurm's and munge's programs from the release's packages, unpacked without apt and
given a RUNPATH into the kit's own ``lib/`` (so the machine needs only its C library), Slurm's
``gpu_nvml.so`` built here for that Slurm, cluster-cli itself with the wheels its renderer needs,
the training scripts and the proof's runner (``cluster_cli.gpu_proof``). No torch: the proof uses
the machine's Python. Made in a temporary directory beside ``out`` and renamed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import cluster_cli
from cluster_cli import apt_repo
from cluster_cli.errors import ClusterCliError
from cluster_cli.gpu_kit import elf
from cluster_cli.smoke.target import DEFAULT_TRAINING_DIR

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurm-wlm-basic-plugins", "munge", "libmunge2")
#: The programs the proof runs, by their name in the kit (sbin/, bin/) and in the packages.
PROGRAMS = {
    "sbin/slurmctld": "usr/sbin/slurmctld-wlm",
    "sbin/slurmd": "usr/sbin/slurmd-wlm",
    "sbin/slurmstepd": "usr/sbin/slurmstepd-wlm",
    "sbin/munged": "usr/sbin/munged",
    "sbin/mungekey": "usr/sbin/mungekey",
    **{f"bin/{name}": f"usr/bin/{name}" for name in (
        "srun", "sbatch", "salloc", "scontrol", "sinfo", "squeue", "scancel", "sacct", "munge", "unmunge",
    )},
}  # fmt: skip
LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu")
SLURM_LIB_DIR = "usr/lib/x86_64-linux-gnu/slurm-wlm"
#: Found on the machine, not carried: the C library and the GPU driver's NVML.
FROM_MACHINE = elf.GLIBC_SONAMES | {"libnvidia-ml.so.1"}
#: RUNPATHs by where a file lands in the kit.
RUNPATH = {"sbin": "$ORIGIN/../lib:$ORIGIN/../lib/slurm", "bin": "$ORIGIN/../lib:$ORIGIN/../lib/slurm",
           "lib": "$ORIGIN:$ORIGIN/slurm", "lib/slurm": "$ORIGIN:$ORIGIN/.."}  # fmt: skip
#: What the proof needs beyond the standard library: the renderer's packages and NVML's binding.
RENDER_REQUIREMENTS = ("pydantic>=2.6,<3", "pyyaml>=6.0,<7", "click>=8.1,<9", "jinja2>=3.1,<4", "rich>=13,<16",
                       "nvidia-ml-py>=12")  # the last: NVIDIA's binding, for the GPU exporter's step
#: The Pythons whose wheels the kit carries (pydantic-core is built per version).
PYTHON_VERSIONS = ("3.10", "3.11", "3.12", "3.13")
APT_CACHE = Path("/var/cache/cluster-cli/gpu-kit")
#: scripts/build-nvml-plugin.sh's builds, one directory per slurmd version.
PLUGIN_CACHE = Path(os.environ.get("CLUSTER_CLI_NVML_PLUGIN_CACHE", "/var/cache/cluster-cli/nvml-plugin"))


@dataclass
class KitManifest:
    """kit.json: what the kit holds; ``run`` reads ``glibc_floor`` before anything else."""

    release: str
    slurm_version: str
    glibc_floor: str
    carried_libraries: list[str]
    dropped_plugins: dict[str, list[str]]
    total_bytes: int
    files: int
    make_s: float
    made: str


class GpuKitError(ClusterCliError):
    """The kit could not be made."""


@dataclass
class KitContents:
    """What went into ``root/``, for kit.json."""

    carried_libraries: list[str] = field(default_factory=list)
    dropped_plugins: dict[str, list[str]] = field(default_factory=dict)
    glibc_floor: tuple[int, int] = (2, 2)


def slurm_version() -> str:
    """The Debian version of this machine's slurmd: the plugin and the packages must be its."""
    done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "slurmd"], capture_output=True, text=True, check=False)
    if done.returncode != 0 or not done.stdout:
        raise GpuKitError("slurmd is not installed here: the kit is made on a machine with Debian's slurmd")
    return done.stdout.strip()


def this_release() -> str:
    """This machine's Debian release: the kit's packages and plugin are this machine's Slurm's."""
    from cluster_cli.bundle.nvml_plugin import control_node_platform

    release, arch = control_node_platform()
    if not release or arch != apt_repo.ARCH:
        raise GpuKitError(f"the kit is made on a Debian {apt_repo.ARCH} machine (this one: "
                          f"{release or 'no Debian release'}, {arch or 'no dpkg'})")
    return release


def plugin_for(given: Path | None) -> Path:
    """The gpu_nvml.so to carry: ``given``, else scripts/build-nvml-plugin.sh's build for this slurmd."""
    if given is not None:
        return given
    built = PLUGIN_CACHE / slurm_version() / "gpu_nvml.so"
    if not built.is_file():
        raise GpuKitError(f"no gpu_nvml.so at {built}: build it with scripts/build-nvml-plugin.sh "
                          "(about 20 s, needs the Debian mirror) or give --nvml-plugin")
    return built


def fetch_packages(release: str, version: str, pool: Path) -> list[Path]:
    """The packages and the closure of their dependencies, from the release's archive."""
    options = apt_repo.make_apt_root(APT_CACHE / f"apt-{release}", apt_repo.release_sources(release))
    pinned = [f"{name}={version}" if name.startswith("slurm") else name for name in PACKAGES]
    names = apt_repo.resolve_closure(options, list(PACKAGES))
    names = [name for name in names if name not in PACKAGES] + pinned
    apt_repo.download(options, names, pool)
    return sorted(pool.glob("*.deb"))


def unpack(debs: list[Path], staging: Path) -> None:
    for deb in debs:
        apt_repo.run(["dpkg-deb", "-x", str(deb), str(staging)])


def _library_index(staging: Path) -> dict[str, Path]:
    """soname -> file in the unpacked packages (the Slurm directory first, as Slurm's RUNPATH)."""
    index: dict[str, Path] = {}
    for directory in (SLURM_LIB_DIR, *LIB_DIRS):
        for path in sorted((staging / directory).glob("*.so*")):
            if path.exists():
                index.setdefault(path.name, path.resolve())
    return index


def _unresolved(path: Path, index: dict[str, Path], seen: dict[str, list[str]]) -> list[str]:
    """The sonames ``path`` needs, directly or through carried libraries, that neither the kit
    nor FROM_MACHINE holds; ``seen`` memoises each library's answer."""
    missing: list[str] = []
    for soname in elf.needed(path):
        if soname in FROM_MACHINE:
            continue
        if soname not in index:
            missing.append(soname)
            continue
        if soname not in seen:
            seen[soname] = []
            seen[soname] = _unresolved(index[soname], index, seen)
        missing += seen[soname]
    return sorted(set(missing))


def _library_closure(roots: list[Path], index: dict[str, Path]) -> set[str]:
    todo = [soname for path in roots for soname in elf.needed(path)]
    found: set[str] = set()
    while todo:
        soname = todo.pop()
        if soname in found or soname in FROM_MACHINE or soname not in index:
            continue
        found.add(soname)
        todo += elf.needed(index[soname])
    return found


def assemble_root(staging: Path, plugin: Path, root: Path) -> KitContents:
    """``root/``: sbin/, bin/, lib/, lib/slurm/ with RUNPATHs into the kit."""
    contents = KitContents()
    index = _library_index(staging)
    (root / "lib" / "slurm").mkdir(parents=True)
    (root / "sbin").mkdir()
    (root / "bin").mkdir()
    for target, source in PROGRAMS.items():
        shutil.copy2(staging / source, root / target)
    plugins = sorted((staging / SLURM_LIB_DIR).glob("*.so"))
    seen: dict[str, list[str]] = {}
    for path in [*plugins, plugin]:
        missing = _unresolved(path, index, seen)
        if missing:
            contents.dropped_plugins[path.name] = missing
        else:
            shutil.copy2(path, root / "lib" / "slurm" / path.name)
    carried = _library_closure(sorted(p for p in root.rglob("*") if p.is_file()), index)
    for soname in sorted(carried - {path.name for path in (root / "lib" / "slurm").iterdir()}):
        shutil.copy2(index[soname], root / "lib" / soname)
    contents.carried_libraries = sorted(carried)
    for path in sorted(p for p in root.rglob("*") if elf.is_elf(p)):
        place = str(path.parent.relative_to(root))
        elf.set_runpath(path, RUNPATH[place])
        contents.glibc_floor = max(contents.glibc_floor, elf.glibc_floor(path))
    return contents


def carry_python(kit: Path) -> None:
    """cluster-cli's package and training/ under python/, the renderer's wheels under wheels/."""
    package = Path(cluster_cli.__file__).resolve().parent
    # share/: an installed wheel's copy of the roles and training/, which the proof does not run
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "share")
    shutil.copytree(package, kit / "python" / "cluster_cli", ignore=ignore)
    # beside the package, where the smoke suite looks for it first (smoke.target)
    shutil.copytree(DEFAULT_TRAINING_DIR, kit / "python" / "training", ignore=ignore)
    shutil.copy2(package / "gpu_proof" / "run.sh", kit / "run")
    wheels = kit / "wheels"
    for version in PYTHON_VERSIONS:
        apt_repo.pip_download(wheels, list(RENDER_REQUIREMENTS), [], version)


def make_kit(out: Path, release: str, plugin: Path) -> KitManifest:
    """Make the kit at ``out`` (missing, empty or an earlier kit); returns kit.json's content."""
    if out.exists() and any(out.iterdir()) and not (out / "kit.json").is_file():
        raise GpuKitError(f"{out}: exists and is not a GPU kit; give a new or empty directory")
    started = time.monotonic()
    version = slurm_version()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as temp:
        work = Path(temp)
        debs = fetch_packages(release, version, APT_CACHE / f"pool-{release}")
        unpack(debs, work / "staging")
        contents = assemble_root(work / "staging", plugin, work / "root")
        kit = work / "kit"
        kit.mkdir()
        with tarfile.open(kit / "root.tar.gz", "w:gz") as archive:
            archive.add(work / "root", arcname="root")
        carry_python(kit)
        manifest = _manifest(kit, release, version, contents, time.monotonic() - started)
        (kit / "kit.json").write_text(json.dumps(asdict(manifest), indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        kit.rename(out)
    return manifest


def _manifest(kit: Path, release: str, version: str, contents: KitContents, seconds: float) -> KitManifest:
    sizes = [path.stat().st_size for path in kit.rglob("*") if path.is_file()]
    return KitManifest(
        release=release,
        slurm_version=version,
        glibc_floor="{}.{}".format(*contents.glibc_floor),
        carried_libraries=contents.carried_libraries,
        dropped_plugins=contents.dropped_plugins,
        total_bytes=sum(sizes),
        files=len(sizes),
        make_s=round(seconds, 1),
        made=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
