"""roles/nvml_emulator/files/nvidia-smi: the test hosts' nvidia-smi reads the emulated GPUs through
NVML, and the nvidia role's parser (filter nvidia_smi_gpus) reads its answer as a driver's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from nvml_emu import CONF_ENV, REPO, SOURCE_DIR, build, have_gcc

sys.path[:0] = [str(REPO / "plugins" / "filter"), str(REPO / "collections")]  # the filters import plugin_utils
from cluster_filters import nvidia_smi_gpus

pytestmark = pytest.mark.skipif(not have_gcc(), reason="gcc is needed to build the NVML emulator")

STANDIN = SOURCE_DIR / "nvidia-smi"
QUERY = "--query-gpu=index,name,driver_version,pci.bus_id,persistence_mode"
CONF = """\
driver_version = 550.54.15
[gpu 0]
name = NVIDIA H100 80GB HBM3
pci_bus_id = 00000000:18:00.0
[gpu 1]
name = NVIDIA H100 80GB HBM3
pci_bus_id = 00000000:2A:00.0
"""


@pytest.fixture(scope="module")
def lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("nvml-emulator")).parent


def smi(lib_dir: Path, conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LD_LIBRARY_PATH": str(lib_dir), CONF_ENV: str(conf)}
    return subprocess.run([sys.executable, str(STANDIN), *args], capture_output=True, text=True, env=env, check=False)


def test_the_nvidia_role_reads_the_emulated_gpus_as_a_drivers(lib_dir: Path, tmp_path: Path) -> None:
    conf = tmp_path / "nvml.conf"
    conf.write_text(CONF)
    run = smi(lib_dir, conf, QUERY, "--format=csv,noheader")
    assert run.returncode == 0, run.stderr
    assert nvidia_smi_gpus(run.stdout.splitlines()) == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15",
         "bus_id": "00000000:18:00.0", "persistence_mode": "[N/A]"},
        {"index": 1, "name": "NVIDIA H100 80GB HBM3", "driver_version": "550.54.15",
         "bus_id": "00000000:2A:00.0", "persistence_mode": "[N/A]"},
    ]


def test_list_and_memory_come_from_nvml(lib_dir: Path, tmp_path: Path) -> None:
    conf = tmp_path / "nvml.conf"
    conf.write_text(CONF.replace("[gpu 1]", "memory_mib = 40960\n[gpu 1]"))
    listed = smi(lib_dir, conf, "-L")
    assert listed.returncode == 0, listed.stderr
    assert [line.split(" (UUID")[0] for line in listed.stdout.splitlines()] == [
        "GPU 0: NVIDIA H100 80GB HBM3", "GPU 1: NVIDIA H100 80GB HBM3"
    ]
    memory = smi(lib_dir, conf, "--query-gpu=memory.total", "--format=csv,noheader,nounits")
    assert memory.stdout.splitlines()[0] == "40960", memory.stdout + memory.stderr


def test_without_a_working_nvml_it_fails_like_the_real_one(lib_dir: Path, tmp_path: Path) -> None:
    run = smi(lib_dir, tmp_path / "missing.conf", QUERY, "--format=csv,noheader")
    assert run.returncode != 0 and "nvmlInit_v2" in run.stderr + run.stdout
