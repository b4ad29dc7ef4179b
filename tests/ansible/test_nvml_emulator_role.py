"""roles/nvml_emulator on this machine: every refusal of the preflight, and the install on a test host.

The role's fixed paths (/proc/driver/nvidia, /dev, ldconfig) are private variables pointed into a
temporary root; the refusal on a host without the test bed marker uses the real default marker
path (this development machine is not a bed host). Each refusal test also checks that nothing was
installed, so it fails when its check is taken out of the preflight.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from role_runner import ansible_playbook, is_root, run_role, write_executable

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

GPUS = [
    {"name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:18:00.0", "nvlink_peers": [1, 1]},
    {"name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:2A:00.0", "minor": 3, "mig": False},
]


def fake_root(tmp_path: Path, ldconfig_output: str = "") -> tuple[Path, dict[str, object]]:
    root = tmp_path / "root"
    for sub in ("lib", "dev", "etc", "proc/driver", "usr/bin"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    ldconfig = write_executable(
        tmp_path / "bin" / "ldconfig",
        f"#!/bin/sh\n[ \"$1\" = -p ] || {{ echo run >> {tmp_path}/ldconfig-runs; exit 0; }}\n"
        f"cat <<'EOF'\n{ldconfig_output}EOF\n",
    )
    (root / "etc" / "testbed-host").write_text("test bed\n")
    return root, {
        "nvml_emulator_allow": True,
        "nvml_emulator_gpus": GPUS,
        "nvml_emulator_lib_dir": str(root / "lib"),
        "nvml_emulator_conf_path": str(root / "etc" / "nvml-emulator.conf"),
        "nvml_emulator_test_marker": str(root / "etc" / "testbed-host"),
        "__nvml_emulator_proc_driver": str(root / "proc" / "driver" / "nvidia"),
        "__nvml_emulator_dev_dir": str(root / "dev"),
        "__nvml_emulator_ldconfig": str(ldconfig),
        "__nvml_emulator_smi": str(root / "usr" / "bin" / "nvidia-smi"),
    }


def assert_refused(run, root: Path, message: str, planted_library: bool = False) -> None:
    assert run.returncode != 0, run.explain()
    assert message in run.text, run.explain()
    assert planted_library or not (root / "lib" / "libnvidia-ml.so.1").exists()
    assert not (root / "lib" / "libnvidia-ml.so").exists()
    assert not (root / "etc" / "nvml-emulator.conf").exists()
    assert not (root / "usr" / "bin" / "nvidia-smi").exists()
    assert not list((root / "dev").iterdir())


def test_refused_unless_allowed(tmp_path: Path) -> None:
    root, extra = fake_root(tmp_path)
    del extra["nvml_emulator_allow"]  # the default: false
    run = run_role(tmp_path, "nvml_emulator", extra_vars=extra)
    assert_refused(run, root, "gpuhost: refusing to install the NVML emulator: nvml_emulator_allow is not true")


def test_refused_on_this_machine_which_is_not_a_test_bed_host(tmp_path: Path) -> None:
    if Path("/etc/cluster-cli/testbed-host").exists():
        pytest.skip("this machine carries the test bed marker: the refusal of a non-bed host cannot be shown here")
    root, extra = fake_root(tmp_path)
    del extra["nvml_emulator_test_marker"]  # the default path, on this machine
    run = run_role(tmp_path, "nvml_emulator", extra_vars=extra)
    assert_refused(
        run,
        root,
        "refusing to install the NVML emulator: /etc/cluster-cli/testbed-host is missing, so this is not a test bed host",
    )


def test_refused_where_an_nvidia_driver_is_loaded(tmp_path: Path) -> None:
    root, extra = fake_root(tmp_path)
    (root / "proc" / "driver" / "nvidia").mkdir()
    run = run_role(tmp_path, "nvml_emulator", extra_vars=extra)
    assert_refused(run, root, "exists, a real NVIDIA driver is loaded here")


def test_refused_where_the_linker_knows_a_drivers_nvml_library(tmp_path: Path) -> None:
    driver_lib = tmp_path / "driver" / "libnvidia-ml.so.1"
    driver_lib.parent.mkdir()
    driver_lib.write_bytes(b"\x7fELF not the emulator")
    listing = f"\tlibnvidia-ml.so.1 (libc6,x86-64) => {driver_lib}\n"
    root, extra = fake_root(tmp_path, ldconfig_output=listing)
    run = run_role(tmp_path, "nvml_emulator", extra_vars=extra)
    assert_refused(run, root, f"NVML emulator: {driver_lib} is a real NVIDIA driver's libnvidia-ml.so.1")


def test_refused_where_the_library_directory_has_a_drivers_nvml_library(tmp_path: Path) -> None:
    root, extra = fake_root(tmp_path)
    (root / "lib" / "libnvidia-ml.so.1").write_bytes(b"\x7fELF a driver's library")
    run = run_role(tmp_path, "nvml_emulator", extra_vars=extra)
    message = f"{root}/lib/libnvidia-ml.so.1 is a real NVIDIA driver's libnvidia-ml.so.1"
    assert_refused(run, root, message, planted_library=True)
    assert (root / "lib" / "libnvidia-ml.so.1").read_bytes() == b"\x7fELF a driver's library"


def device(path: Path) -> tuple[int, int]:
    st = path.stat()
    assert stat.S_ISCHR(st.st_mode), path
    return os.major(st.st_rdev), os.minor(st.st_rdev)


@pytest.mark.skipif(not is_root(), reason="creating /dev/nvidiaN character devices (mknod) needs root")
@pytest.mark.skipif(shutil.which("gcc") is None, reason="the control node needs gcc to compile the emulator")
def test_installs_on_a_test_host_and_the_library_reports_the_gpus(tmp_path: Path) -> None:
    root, extra = fake_root(tmp_path)
    run = run_role(tmp_path, "nvml_emulator", extra_vars=extra)
    assert run.returncode == 0, run.explain()
    assert "gpuhost: NVML emulator installed" in run.text and "2 GPU(s)" in run.text
    lib = root / "lib" / "libnvidia-ml.so.1"
    assert os.readlink(root / "lib" / "libnvidia-ml.so") == "libnvidia-ml.so.1"
    assert "SONAME" in subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=False).stdout
    assert [device(root / "dev" / name) for name in ("nvidia0", "nvidia3")] == [(195, 0), (195, 3)]
    conf = (root / "etc" / "nvml-emulator.conf").read_text()
    assert "[gpu 1]\nname = NVIDIA H100 80GB HBM3\npci_bus_id = 00000000:2A:00.0\nminor = 3\nmig = off\n" in conf
    assert "nvlink_peers = 1,1\n" in conf
    assert (tmp_path / "ldconfig-runs").read_text() == "run\n"
    smi = root / "usr" / "bin" / "nvidia-smi"
    assert os.access(smi, os.X_OK) and smi.read_bytes() == (REPO / "roles/nvml_emulator/files/nvidia-smi").read_bytes()

    os.environ["CLUSTER_CLI_NVML_EMULATOR_CONF"] = str(root / "etc" / "nvml-emulator.conf")
    try:
        nvml = ctypes.CDLL(str(lib))
        count = ctypes.c_uint()
        assert nvml.nvmlInit_v2() == 0 and nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0
        assert count.value == 2
        nvml.nvmlShutdown()
    finally:
        del os.environ["CLUSTER_CLI_NVML_EMULATOR_CONF"]

    again = run_role(tmp_path / "again", "nvml_emulator", extra_vars=extra)
    assert again.returncode == 0, again.explain()  # its own library is not taken for a driver's
    assert again.recap("gpuhost")["changed"] == 0, again.explain()
