"""roles/nvidia on this machine: the GPU-host and NVML preflights, with and without a driver.

The "no driver" cases need a machine without a working NVIDIA driver (skipped on a GPU host);
a driver is stood in for by a fake nvidia-smi on PATH where the parsing is what is tested.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from role_runner import ansible_playbook, nvidia_smi_works, run_role, write_executable

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

FAKE_SMI = """#!/bin/sh
echo "0, NVIDIA H100 80GB HBM3, 550.54.15, 00000000:18:00.0, Enabled"
echo "1, NVIDIA H100 80GB HBM3, 550.54.15, 00000000:2A:00.0, Enabled"
"""


def no_real_driver() -> None:
    if nvidia_smi_works():
        pytest.skip("this machine has a working NVIDIA driver: the no-driver failure cannot be shown here")


def fake_driver(tmp_path: Path) -> Path:
    write_executable(tmp_path / "bin" / "nvidia-smi", FAKE_SMI)
    return tmp_path / "bin"


def test_gpu_host_without_driver_fails_naming_host_and_remedy(tmp_path: Path) -> None:
    no_real_driver()
    run = run_role(tmp_path, "nvidia", host_vars={"nvidia_gpu_count": 8})
    assert run.returncode != 0, run.explain()
    assert "gpuhost: the inventory gives this host 8 GPU(s), but it has no working NVIDIA driver" in run.text
    assert "Install the NVIDIA data-center driver" in run.text
    assert "gpus.fake: true" in run.text
    assert run.recap("gpuhost")["failed"] == 1


def test_gpu_host_with_a_broken_driver_says_what_nvidia_smi_said(tmp_path: Path) -> None:
    no_real_driver()
    bin_dir = tmp_path / "bin"
    write_executable(
        bin_dir / "nvidia-smi",
        '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9\n',
    )
    run = run_role(tmp_path, "nvidia", host_vars={"nvidia_gpu_count": 2}, path_prefix=bin_dir)
    assert run.returncode != 0, run.explain()
    assert (
        "nvidia-smi exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
        in run.text
    )


def test_fake_gpu_host_needs_no_driver(tmp_path: Path) -> None:
    no_real_driver()
    run = run_role(tmp_path, "nvidia", host_vars={"nvidia_gpu_count": 2, "nvidia_gpu_fake": True})
    assert run.returncode == 0, run.explain()
    assert "gpuhost: fake GPUs, no driver needed." in run.text
    assert "not needed, fake GPUs" in run.text


def test_host_without_gpus_needs_no_driver(tmp_path: Path) -> None:
    no_real_driver()
    run = run_role(tmp_path, "nvidia")
    assert run.returncode == 0, run.explain()
    assert "not needed, no GPUs" in run.text


def test_working_driver_is_reported_and_counted(tmp_path: Path) -> None:
    run = run_role(tmp_path, "nvidia", host_vars={"nvidia_gpu_count": 2}, path_prefix=fake_driver(tmp_path))
    assert run.returncode == 0, run.explain()
    assert "gpuhost: NVIDIA driver 550.54.15, 2 GPU(s)." in run.text
    assert "GPUs: NVIDIA H100 80GB HBM3, NVIDIA H100 80GB HBM3" in run.text


def test_fewer_gpus_than_the_inventory_fails(tmp_path: Path) -> None:
    run = run_role(tmp_path, "nvidia", host_vars={"nvidia_gpu_count": 4}, path_prefix=fake_driver(tmp_path))
    assert run.returncode != 0, run.explain()
    assert (
        "gpuhost: nvidia-smi shows 2 GPU(s) (00000000:18:00.0, 00000000:2A:00.0), the inventory gives it 4"
        in run.text
    )


def test_nvml_autodetect_without_the_plugin_fails_with_both_remedies(tmp_path: Path) -> None:
    plugins = tmp_path / "slurm-wlm"
    plugins.mkdir()
    run = run_role(
        tmp_path,
        "nvidia",
        host_vars={"nvidia_nvml_autodetect": True, "nvidia_slurm_plugin_dir": str(plugins)},
    )
    assert run.returncode != 0, run.explain()
    assert f"gpuhost: gres.conf asks AutoDetect=nvml, but {plugins} has no gpu_nvml.so" in run.text
    assert "slurm.nvml_plugin" in run.text
    assert "gpus.devices" in run.text


def test_nvml_autodetect_with_the_plugin_passes_the_preflight(tmp_path: Path) -> None:
    no_real_driver()
    plugins = tmp_path / "slurm-wlm"
    plugins.mkdir()
    (plugins / "gpu_nvml.so").write_bytes(b"")
    run = run_role(
        tmp_path,
        "nvidia",
        host_vars={"nvidia_nvml_autodetect": True, "nvidia_slurm_plugin_dir": str(plugins)},
    )
    assert run.returncode == 0, run.explain()


def test_nvml_gpu_host_needs_the_unversioned_library_name(tmp_path: Path) -> None:
    ldconfig = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False).stdout
    if "libnvidia-ml.so" in ldconfig:
        pytest.skip("this machine has an NVML library: the missing-library failure cannot be shown here")
    plugins = tmp_path / "slurm-wlm"
    plugins.mkdir()
    (plugins / "gpu_nvml.so").write_bytes(b"")
    run = run_role(
        tmp_path,
        "nvidia",
        host_vars={
            "nvidia_gpu_count": 2,
            "nvidia_nvml_autodetect": True,
            "nvidia_slurm_plugin_dir": str(plugins),
        },
        path_prefix=fake_driver(tmp_path),
    )
    assert run.returncode != 0, run.explain()
    assert "gpuhost: AutoDetect=nvml needs the name libnvidia-ml.so" in run.text
    assert "nor libnvidia-ml.so.1: the driver is incomplete" in run.text


# Issue 17: every task a host runs or skips costs the control node about 17 ms per host. A GPU
# host with a working driver (AutoDetect=nvml on or off) took 26 results of this role before the
# cuts (docs/benchmarks.md, "GPU roles: results per GPU host"); 9 now, the argument check included.
RESULTS_PER_GPU_HOST = 9

FAKE_LDCONFIG = """#!/bin/sh
[ "$1" = -p ] || exit 0
printf '\\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\\n'
printf '\\tlibnvidia-ml.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so\\n'
"""


@pytest.mark.parametrize("nvml", [False, True])
def test_results_per_gpu_host_stay_few(tmp_path: Path, nvml: bool) -> None:
    bin_dir = fake_driver(tmp_path)
    write_executable(bin_dir / "ldconfig", FAKE_LDCONFIG)
    plugins = tmp_path / "slurm-wlm"
    plugins.mkdir()
    (plugins / "gpu_nvml.so").write_bytes(b"")
    run = run_role(
        tmp_path / "run",
        "nvidia",
        host_vars={"nvidia_gpu_count": 2, "nvidia_nvml_autodetect": nvml, "nvidia_slurm_plugin_dir": str(plugins)},
        path_prefix=bin_dir,
    )
    assert run.returncode == 0, run.explain()
    assert "gpuhost: NVIDIA driver 550.54.15, 2 GPU(s)." in run.text
    assert ("libnvidia-ml.so resolves; AutoDetect=nvml can load the driver's NVML." in run.text) is nvml
    recap = run.recap("gpuhost")
    results = recap["ok"] + recap["skipped"] + recap["failed"]
    assert results <= RESULTS_PER_GPU_HOST, f"{results} results per GPU host (at most {RESULTS_PER_GPU_HOST}): {recap}"
    assert recap["changed"] == 0
