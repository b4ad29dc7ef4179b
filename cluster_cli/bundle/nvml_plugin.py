"""The gpu/nvml plugin package for a bundle: built on the control node by roles/slurm_build
(playbooks/build_nvml_plugin.yml), or a package the user built before."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import yaml

from cluster_cli.ansible.runner import run_playbook
from cluster_cli.apt_repo import ARCH
from cluster_cli.bundle.packages import NVML_PLUGIN_PACKAGE
from cluster_cli.errors import ClusterCliError, RefusedError
from cluster_cli.paths import project_dir

#: roles/slurm_build's default repository: a build already there is reused, not redone.
REPO_DIR = Path("/var/lib/cluster-cli/slurm-repo")


def control_node_platform(os_release: Path = Path("/etc/os-release")) -> tuple[str, str]:
    """This machine's Debian release (codename) and dpkg architecture; ("", "") when unknown."""
    codename = ""
    if os_release.is_file():
        for line in os_release.read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                codename = line.split("=", 1)[1].strip().strip('"')
    try:
        arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        arch = ""
    return codename, arch.strip()


def check_can_build(release: str, platform: tuple[str, str]) -> None:
    """The plugin links against this machine's build of Slurm's libraries: refuse a control node
    of another release or architecture rather than pack a wrong package."""
    codename, arch = platform
    if (codename, arch) != (release, ARCH):
        raise RefusedError(
            f"release mismatch: the NVML plugin must be built on Debian {release}/{ARCH}, this control node "
            f"is {codename or 'not Debian'}/{arch or '?'}; build it on such a machine and pass "
            "--nvml-plugin-deb PATH"
        )


def plugin_deb(path: Path) -> Path:
    """A prebuilt plugin package given by the user: checked by name before it is packed."""
    if not path.is_file() or not path.name.startswith(f"{NVML_PLUGIN_PACKAGE}_") or path.suffix != ".deb":
        raise RefusedError(f"{path}: not a {NVML_PLUGIN_PACKAGE}_VERSION_{ARCH}.deb file")
    return path


def build_variables(version: str, repo_dir: Path = REPO_DIR) -> dict[str, object]:
    """The role's variables: build (or reuse) the plugin of exactly ``version``, install nothing."""
    return {
        "slurm_build_version": version,
        "slurm_build_repo_dir": str(repo_dir),
        "slurm_build_install": False,
    }


def build(version: str, work: Path, repo_dir: Path = REPO_DIR) -> Path:
    """Run playbooks/build_nvml_plugin.yml on this machine; the package it made (or found). Its log
    goes to ``work``/nvml-build.log (not into the bundle)."""
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        variables = Path(scratch) / "vars.yml"
        variables.write_text(yaml.safe_dump(build_variables(version, repo_dir)))
        inventory = Path(scratch) / "inventory.yml"
        inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
        result = run_playbook(
            project_dir() / "playbooks" / "build_nvml_plugin.yml", [inventory], [variables], work / "nvml-build.log"
        )
    if not result.ok:
        failed = "; ".join(f"{failure.task}: {failure.message}" for failure in result.failures[:3])
        raise ClusterCliError(f"the NVML plugin build failed ({failed or 'see ' + str(result.log_path)})")
    return find_built(repo_dir, version)


def find_built(repo_dir: Path, version: str) -> Path:
    """The plugin package of ``version`` (any suffix: +nvml1) in the role's repository."""
    found = sorted(repo_dir.glob(f"{NVML_PLUGIN_PACKAGE}_{version}+*_{ARCH}.deb"))
    if not found:
        raise ClusterCliError(f"no {NVML_PLUGIN_PACKAGE} {version} package in {repo_dir} after the build")
    return found[-1]
