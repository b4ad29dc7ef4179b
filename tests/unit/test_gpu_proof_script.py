"""scripts/gpu-proof.sh on this GPU-less machine: its prerequisite checks stop it, naming what is
missing, before anything is changed; --dry-run prints every step; the checks it runs exist."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_cli.smoke import CHECKS

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu-proof.sh"


def codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    return ""


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A bundle directory as the script checks it: bundle.json for this machine's release."""
    directory = tmp_path / "bundle"
    (directory / "apt").mkdir(parents=True)
    (directory / "apt" / "Packages").write_text("")
    (directory / "bundle.json").write_text(json.dumps({"release": codename(), "total_bytes": 0}))
    return directory


@pytest.fixture
def path_without_nvidia_smi(tmp_path: Path) -> str:
    """A PATH with the tools the prerequisite checks use, and no nvidia-smi even on a GPU machine."""
    tools = tmp_path / "bin"
    tools.mkdir()
    found = shutil.which("id")
    assert found
    (tools / "id").symlink_to(found)
    (tools / "python3").symlink_to(Path(sys.executable).resolve())  # not a shim that needs a shell
    return str(tools)


def run_script(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=path or os.environ["PATH"])
    bash = shutil.which("bash")
    assert bash
    return subprocess.run([bash, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60, check=False)


def test_syntax_and_shellcheck():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    if shutil.which("shellcheck"):
        subprocess.run(["shellcheck", str(SCRIPT)], check=True)
    assert os.access(SCRIPT, os.X_OK)
    assert "set -euo pipefail" in SCRIPT.read_text()


def test_it_stops_naming_the_missing_nvidia_smi_and_changes_nothing(tmp_path, bundle, path_without_nvidia_smi):
    out = tmp_path / "out"
    result = run_script(str(bundle), str(out), path=path_without_nvidia_smi)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "nvidia-smi not found: install the NVIDIA driver" in result.stderr
    assert "nothing was changed" in result.stderr
    assert "==>" not in result.stdout  # no step started
    assert not out.exists()


def test_it_names_a_directory_that_is_not_a_bundle_and_a_release_mismatch(tmp_path, bundle, path_without_nvidia_smi):
    result = run_script(str(tmp_path / "nothing"), str(tmp_path / "out"), path=path_without_nvidia_smi)
    assert result.returncode == 1 and "is not a bundle" in result.stderr
    assert "has no torch wheel (made with --no-wheels?)" in result.stderr
    (bundle / "bundle.json").write_text(json.dumps({"release": "sid"}))
    result = run_script(str(bundle), str(tmp_path / "out"), path=path_without_nvidia_smi)
    assert "release mismatch: the bundle is for Debian sid" in result.stderr


def test_dry_run_prints_every_step_and_changes_nothing(tmp_path, bundle):
    out = tmp_path / "out"
    result = run_script("--dry-run", str(bundle), str(out))
    assert result.returncode == 0, result.stderr
    for text in ("apt-get", "deploy", "scontrol show node", "slurmd -G", "--only gpu-binding\\,gpu\\,allreduce\\,ddp",
                 "summary.md"):
        assert text in result.stdout, text
    assert not out.exists()


def test_the_gpu_checks_it_runs_are_smoke_checks():
    text = SCRIPT.read_text()
    line = next(line for line in text.splitlines() if line.startswith("readonly GPU_CHECKS="))
    names = line.split("=", 1)[1].split(",")
    assert names == ["gpu-binding", "gpu", "allreduce", "ddp"]
    assert set(names) <= {check.name for check in CHECKS}


def test_usage_without_a_bundle_exits_2():
    assert run_script().returncode == 2


def test_the_inventory_it_writes_is_valid(tmp_path):
    from string import Template

    import yaml

    from cluster_cli.loader import load_cluster

    text = SCRIPT.read_text()
    body = text.split('cat >"$INVENTORY" <<EOF\n', 1)[1].split("\nEOF\n", 1)[0]
    values = {"NODE": "gpubox", "sockets": 2, "cores": 48, "threads": 2, "memory_mb": 1900000, "GPU_COUNT": 8,
              "GPU_TYPE": "h200", "BUNDLE_HOST_PATH": "/srv/cluster-bundle"}
    document = yaml.safe_load(Template(body).substitute(values))
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(yaml.safe_dump(document))
    cluster = load_cluster(inventory)
    group = cluster.inventory.node_groups[0]
    assert group.gpus is not None and (group.gpus.count, group.gpus.autodetect) == (8, "nvml")
    assert set(cluster.hosts["gpubox"].roles) == {"controller", "database", "compute"}
    assert cluster.inventory.slurm.nvml_plugin == "apt", "the plugin comes from the bundle, not a build"
