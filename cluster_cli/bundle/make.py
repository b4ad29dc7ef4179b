"""Make a bundle: everything an air-gapped install of a cluster needs, in one directory::

    DIR/apt/Packages, Packages.gz, pool/*.deb   a flat apt repository (package_mirror.apt)
    DIR/wheels/*.whl                            the training environment's wheels (package_mirror.pip)
    DIR/control/*.whl                           --control-node: cluster-cli and its dependencies (ansible-core)
    DIR/rendered/...                            the files `cluster-cli render` writes, secrets left out
    DIR/gpu-proof.sh                            scripts/gpu-proof.sh, to run on the GPU machine
    DIR/bundle.json                             what was asked and resolved, every file's size and sha256

It is written into a temporary directory beside DIR and renamed over it at the end, so a failure
leaves DIR as it was. No secret is ever written: none is generated for a bundle.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cluster_cli import __version__
from cluster_cli.apt_repo import (
    ARCH,
    DEFAULT_DEBIAN_MIRROR,
    DEFAULT_SECURITY_MIRROR,
    PYTHON_VERSION,
    download,
    index,
    make_apt_root,
    pip_download,
    release_sources,
    resolve_closure,
    run,
)
from cluster_cli.bundle import nvml_plugin
from cluster_cli.bundle.packages import debian_packages, pip_requirements
from cluster_cli.cluster import Cluster
from cluster_cli.errors import RefusedError
from cluster_cli.paths import project_root
from cluster_cli.render import RenderedFile, render_configs, swap_in, write_files
from cluster_cli.render.ansible_inventory import render_ansible_inventory

MANIFEST = "bundle.json"
#: Where a bundle is meant to be on the hosts (docs/gpu-validation.md; the gpu-single example).
HOST_PATH = "/srv/cluster-bundle"
PROOF_SCRIPT = "gpu-proof.sh"


@dataclass(frozen=True)
class BundleOptions:
    release: str = "bookworm"
    wheels: bool = True
    nvml_plugin_deb: Path | None = None
    infiniband: bool = False
    control_node: bool = False
    # tests and small bundles: these instead of what the cluster installs
    packages: list[str] | None = None
    requirements: list[str] | None = None
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "cluster-cli")
    debian_mirror: str = DEFAULT_DEBIAN_MIRROR
    security_mirror: str = DEFAULT_SECURITY_MIRROR


@dataclass(frozen=True)
class Made:
    """A bundle made: its manifest (bundle.json) and the summary line the CLI prints."""

    manifest: dict[str, object]
    summary: str


def check_target(out: Path) -> None:
    """A bundle replaces only a directory that is missing, empty, or an earlier bundle."""
    if out.exists() and not out.is_dir():
        raise RefusedError(f"{out} is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise RefusedError(f"{out} is not empty and holds no {MANIFEST}: not a bundle, left as it is")


def check_release(options: BundleOptions) -> None:
    if options.release not in PYTHON_VERSION:
        raise RefusedError(f"unsupported release {options.release!r}; choose one of {sorted(PYTHON_VERSION)}")


def make_bundle(cluster: Cluster, out: Path, options: BundleOptions) -> Made:
    """Build the bundle of ``cluster`` into ``out``."""
    out = out.absolute()
    check_release(options)
    check_target(out)
    plugin_wanted = cluster.inventory.autodetects_gpus()
    if plugin_wanted and options.nvml_plugin_deb is None:
        nvml_plugin.check_can_build(options.release, nvml_plugin.control_node_platform())
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        manifest = _fill(cluster, staging, out, options, plugin_wanted)
        swap_in(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Made(manifest, _summary(out, cluster, options, manifest))


def _summary(out: Path, cluster: Cluster, options: BundleOptions, manifest: dict[str, object]) -> str:
    resolved, requirements = manifest["resolved"], manifest["requirements"]
    assert isinstance(resolved, list) and isinstance(requirements, list)
    plugin = f" + {manifest['nvml_plugin']}" if manifest["nvml_plugin"] else ""
    size = int(str(manifest["total_bytes"])) / 1e6
    line = (
        f"bundle {out}: cluster '{cluster.name}', Debian {options.release}, {len(resolved)} packages{plugin}, "
        f"{len(requirements)} wheel requirements, {size:.1f} MB"
    )
    if plugin and cluster.inventory.slurm.nvml_plugin != "apt":
        line += "\nnote: set slurm.nvml_plugin: apt so the hosts install the plugin from the bundle"
    return line


def _fill(cluster: Cluster, staging: Path, out: Path, options: BundleOptions, plugin_wanted: bool) -> dict[str, object]:
    timings: dict[str, float] = {}
    started = time.monotonic()
    asked = options.packages if options.packages is not None else debian_packages(cluster, options.infiniband)
    _reuse_pool(out, staging / "apt" / "pool")
    with _timed(timings, "apt"):
        resolved = _apt_packages(staging / "apt", sorted(set(asked)), options)
    check_slurm_pin(cluster, staging / "apt" / "pool")
    plugin = None
    if plugin_wanted:
        with _timed(timings, "nvml_plugin"):
            plugin = _add_plugin(cluster, staging / "apt" / "pool", options)
    with _timed(timings, "index"):
        index(staging / "apt")
    requirements: list[str] = []
    if options.wheels:
        requirements = options.requirements if options.requirements is not None else pip_requirements(cluster)
        with _timed(timings, "wheels"):
            _wheels(staging / "wheels", requirements, options.release)
    if options.control_node:
        with _timed(timings, "control_node"):
            _control_node_wheels(staging / "control", options.release)
    with _timed(timings, "rendered"):
        _rendered(cluster, staging / "rendered")
    _proof_script(staging)
    timings["total"] = round(time.monotonic() - started, 1)
    manifest = _manifest(cluster, staging, options, asked, resolved, plugin, requirements, timings)
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    os.chmod(staging, 0o755)
    return manifest


@contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.monotonic()
    yield
    timings[name] = round(time.monotonic() - started, 1)


def _reuse_pool(out: Path, pool: Path) -> None:
    """Link the .debs of the bundle being replaced into the new pool: only new ones are fetched."""
    pool.mkdir(parents=True)
    for deb in (out / "apt" / "pool").glob("*.deb") if (out / MANIFEST).is_file() else ():
        try:
            os.link(deb, pool / deb.name)
        except OSError:
            shutil.copy2(deb, pool / deb.name)


def _apt_packages(repo: Path, packages: list[str], options: BundleOptions) -> list[str]:
    root = options.cache_dir / "apt" / options.release
    root.mkdir(parents=True, exist_ok=True)
    # the private apt state of a release is shared by every bundle (and the test bed): one at a time
    with open(root.parent / f".{options.release}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        apt = make_apt_root(root, release_sources(options.release, options.debian_mirror, options.security_mirror))
        resolved = resolve_closure(apt, packages)
        download(apt, resolved, repo / "pool")
    return resolved


def slurm_version_in(pool: Path) -> str:
    """The Debian version of the slurmd package in the pool ('' when there is none)."""
    found = sorted(pool.glob(f"slurmd_*_{ARCH}.deb"))
    return found[-1].name.split("_")[1].replace("%3a", ":") if found else ""


def check_slurm_pin(cluster: Cluster, pool: Path) -> None:
    """The roles install slurm.version exactly; the bundle holds the archive's candidate. Refuse a
    bundle whose Slurm is not the pinned one rather than one the hosts cannot install from."""
    pinned, bundled = cluster.inventory.slurm.version, slurm_version_in(pool)
    if pinned and bundled and pinned != bundled:
        raise RefusedError(
            f"slurm.version is {pinned} but the archive's slurmd is {bundled}: the bundle holds only the "
            "archive's current version; pin that one or remove the pin"
        )


def _add_plugin(cluster: Cluster, pool: Path, options: BundleOptions) -> str:
    if options.nvml_plugin_deb is not None:
        deb = nvml_plugin.plugin_deb(options.nvml_plugin_deb)
    else:
        version = cluster.inventory.slurm.version or slurm_version_in(pool)
        if not version:
            raise RefusedError("the NVML plugin needs slurmd's version: set slurm.version or bundle slurmd")
        deb = nvml_plugin.build(version, options.cache_dir)
    shutil.copy2(deb, pool / deb.name)
    return deb.name


def _wheels(wheels: Path, requirements: list[str], release: str) -> None:
    wheels.mkdir(parents=True, exist_ok=True)
    if requirements:
        pip_download(wheels, requirements, [], PYTHON_VERSION[release])


def control_node_requirements() -> list[str]:
    """cluster-cli's own dependencies (no extras), as the installed package declares them."""
    declared = importlib.metadata.requires("cluster-cli") or []
    return [requirement for requirement in declared if ";" not in requirement]


def _control_node_wheels(control: Path, release: str) -> None:
    """A wheel of this cluster-cli and the wheels of its dependencies, for a control node with no
    network (scripts/gpu-proof.sh installs them with pip --no-index)."""
    root = project_root()
    if root is None or not (root / "pyproject.toml").is_file():
        raise RefusedError("--control-node needs cluster-cli's source checkout (its pyproject.toml) to build its wheel")
    control.mkdir(parents=True)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(control),
         str(root)], timeout=600)  # fmt: skip
    pip_download(control, control_node_requirements(), [], PYTHON_VERSION[release])


def _proof_script(staging: Path) -> None:
    """scripts/gpu-proof.sh travels with the bundle (a source checkout has it; a wheel does not)."""
    root = project_root()
    script = root / "scripts" / PROOF_SCRIPT if root is not None else None
    if script is not None and script.is_file():
        shutil.copy2(script, staging / PROOF_SCRIPT)


def _rendered(cluster: Cluster, directory: Path) -> None:
    """The files `cluster-cli render` writes, but for the secrets: no database password is given,
    so slurmdbd.conf is not rendered, and no secret_vars.yml or cluster_vars.yml (control-node paths)."""
    files = [item for item in render_configs(cluster, None) if not item.secret]
    files.append(RenderedFile("ansible/inventory.yml", render_ansible_inventory(cluster)))
    write_files(directory, files)


def _manifest(
    cluster: Cluster,
    staging: Path,
    options: BundleOptions,
    asked: list[str],
    resolved: list[str],
    plugin: str | None,
    requirements: list[str],
    timings: dict[str, float],
) -> dict[str, object]:
    paths = [path for path in sorted(staging.rglob("*")) if path.is_file()]
    return {
        "bundle": 1,
        "cluster": cluster.name,
        "release": options.release,
        "arch": ARCH,
        "python": PYTHON_VERSION[options.release],
        "made_by": f"cluster-cli {__version__}",
        "made_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "packages": sorted(set(asked)),
        "resolved": resolved,
        "nvml_plugin": plugin,
        "requirements": requirements,
        "package_mirror": package_mirror_for(HOST_PATH, bool(requirements)),
        "files": [_file_entry(staging, path) for path in paths],
        "total_bytes": sum(path.stat().st_size for path in paths),
        "timings_s": timings,
    }


def _file_entry(root: Path, path: Path) -> dict[str, object]:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return {"path": str(path.relative_to(root)), "size": path.stat().st_size, "sha256": digest.hexdigest()}


def package_mirror_for(host_path: str, wheels: bool) -> dict[str, object]:
    """The inventory's package_mirror section for this bundle copied to ``host_path`` on every host."""
    mirror: dict[str, object] = {"apt": {"uri": f"file:{host_path}/apt", "suites": ["./"], "trusted": True}}
    if wheels:
        mirror["pip"] = {"find_links": [f"{host_path}/wheels"], "no_index": True}
    return mirror
