"""The NVML emulator library on its own: exports, layouts against nvml.h, values, error answers.

Slurm's own plugin reading it is tests/nvml/test_slurmd_autodetect.py.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import pytest
from nvml_emu import (
    DRIVER_NOT_LOADED,
    INSUFFICIENT_SIZE,
    INVALID_ARGUMENT,
    NOT_FOUND,
    NOT_SUPPORTED,
    REPO,
    SOURCE_DIR,
    SUCCESS,
    UNINITIALIZED,
    UNKNOWN,
    DeviceAttributes,
    PciInfo,
    build,
    handle,
    have_gcc,
    loaded,
    nvml_header_dir,
    text,
)

pytestmark = pytest.mark.skipif(not have_gcc(), reason="gcc is needed to build the NVML emulator")

TWO_GPUS = """\
driver_version = 550.54.15
[gpu 0]
name = NVIDIA H100 80GB HBM3
uuid = GPU-11111111-2222-3333-4444-555555555555
pci_bus_id = 00000000:18:00.0
cpu_affinity = 0-1,66
nvlink_peers = 1,1,1
[gpu 1]   # defaults for everything but the name, the minor number and MIG
name = NVIDIA L40S
minor = 5
mig = unsupported
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("nvml-emulator"))


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "nvml-emulator.conf"
    path.write_text(TWO_GPUS)
    return path


def slurm_symbols() -> list[str]:
    lines = (REPO / "tests" / "nvml" / "slurm_nvml_symbols.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_exports_every_nvml_function_slurm_calls(lib: Path) -> None:
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in nm.stdout.splitlines()}
    wanted = slurm_symbols()
    assert len(wanted) >= 26
    assert sorted(set(wanted) - exported) == []


def test_soname_is_libnvidia_ml_so_1(lib: Path) -> None:
    dynamic = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libnvidia-ml.so.1]" in dynamic


def compile_layout_check(include: Path, header_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["gcc", "-fsyntax-only", f"-I{include}", f"-I{header_dir}", str(REPO / "tests" / "nvml" / "layout_check.c")],
        capture_output=True,
        text=True,
        check=False,
    )


def test_types_and_values_match_nvidias_nvml_h(tmp_path: Path) -> None:
    include = nvml_header_dir()
    if include is None:
        pytest.skip("no nvml.h here (libnvidia-ml-dev, scripts/build-nvml-plugin.sh, or CLUSTER_CLI_NVML_INCLUDE)")
    ok = compile_layout_check(include, SOURCE_DIR)
    assert ok.returncode == 0, ok.stderr
    # the check has teeth: one value changed in a copy of the emulator's header fails it
    wrong = (SOURCE_DIR / "nvml_emulator.h").read_text().replace("EMU_ERROR_NO_DATA = 21", "EMU_ERROR_NO_DATA = 22")
    (tmp_path / "nvml_emulator.h").write_text(wrong)
    broken = compile_layout_check(include, tmp_path)
    assert broken.returncode != 0 and "EMU_ERROR_NO_DATA != NVML_ERROR_NO_DATA" in broken.stderr


def test_without_a_config_file_there_is_no_driver(lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTER_CLI_NVML_EMULATOR_CONF", str(tmp_path / "absent.conf"))
    nvml = ctypes.CDLL(str(lib))
    nvml.nvmlErrorString.restype = ctypes.c_char_p
    assert nvml.nvmlInit_v2() == DRIVER_NOT_LOADED
    assert nvml.nvmlErrorString(DRIVER_NOT_LOADED) == b"Driver Not Loaded"
    count = ctypes.c_uint()
    assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == UNINITIALIZED


@pytest.mark.parametrize("line", ["colour = green", "utilization_gpu = 101", "processes = 12", "processes = 1:x",
                                  "temperature_c = hot"])
def test_a_malformed_config_is_an_error_naming_the_line(
    lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], line: str
) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text(f"[gpu 0]\nname = x\n{line}\n")
    monkeypatch.setenv("CLUSTER_CLI_NVML_EMULATOR_CONF", str(bad))
    assert ctypes.CDLL(str(lib)).nvmlInit_v2() == UNKNOWN
    assert f"nvml-emulator: {bad}:3: unknown key or bad value" in capfd.readouterr().err


def test_reports_the_configured_gpus(lib: Path, conf: Path) -> None:
    with loaded(lib, conf) as nvml:
        count = ctypes.c_uint()
        assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == SUCCESS and count.value == 2
        driver = ctypes.create_string_buffer(80)
        assert nvml.nvmlSystemGetDriverVersion(driver, 80) == SUCCESS and driver.value == b"550.54.15"
        first, second = handle(nvml, 0), handle(nvml, 1)
        assert text(nvml, "nvmlDeviceGetName", first) == "NVIDIA H100 80GB HBM3"
        assert text(nvml, "nvmlDeviceGetName", second) == "NVIDIA L40S"
        assert text(nvml, "nvmlDeviceGetUUID", first) == "GPU-11111111-2222-3333-4444-555555555555"
        assert text(nvml, "nvmlDeviceGetUUID", second) == "GPU-00000000-0000-4000-8000-000000000001"
        pci = PciInfo()
        assert nvml.nvmlDeviceGetPciInfo_v3(second, ctypes.byref(pci)) == SUCCESS
        assert (pci.busId, pci.busIdLegacy, pci.bus) == (b"00000000:19:00.0", b"0000:19:00.0", 0x19)
        minor = ctypes.c_uint()
        assert nvml.nvmlDeviceGetMinorNumber(second, ctypes.byref(minor)) == SUCCESS and minor.value == 5
        cpus = (ctypes.c_ulong * 4)()
        assert nvml.nvmlDeviceGetCpuAffinity(first, 4, cpus) == SUCCESS
        assert list(cpus) == [0b11, 0b100, 0, 0]


def test_nvlinks_lead_to_the_peers_pci_address(lib: Path, conf: Path) -> None:
    with loaded(lib, conf) as nvml:
        first, second = handle(nvml, 0), handle(nvml, 1)
        state = ctypes.c_int()
        states = []
        for link in range(4):
            assert nvml.nvmlDeviceGetNvLinkState(first, link, ctypes.byref(state)) == SUCCESS
            states.append(state.value)
        assert states == [1, 1, 1, 0]
        assert nvml.nvmlDeviceGetNvLinkState(first, 18, ctypes.byref(state)) == INVALID_ARGUMENT
        remote = PciInfo()
        assert nvml.nvmlDeviceGetNvLinkRemotePciInfo_v2(first, 2, ctypes.byref(remote)) == SUCCESS
        assert remote.busId == b"00000000:19:00.0"
        assert nvml.nvmlDeviceGetNvLinkState(second, 0, ctypes.byref(state)) == NOT_SUPPORTED


def test_mig_devices_of_a_gpu_in_mig_mode(lib: Path, tmp_path: Path) -> None:
    conf = tmp_path / "mig.conf"
    conf.write_text("[gpu 0]\nmig = on\nmig_devices = 2\n")
    with loaded(lib, conf) as nvml:
        gpu = handle(nvml, 0)
        current, pending, count = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        assert nvml.nvmlDeviceGetMigMode(gpu, ctypes.byref(current), ctypes.byref(pending)) == SUCCESS
        assert (current.value, pending.value) == (1, 1)
        assert nvml.nvmlDeviceGetMaxMigDeviceCount(gpu, ctypes.byref(count)) == SUCCESS and count.value == 7
        mig = ctypes.c_void_p()
        assert nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 2, ctypes.byref(mig)) == NOT_FOUND
        assert nvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1, ctypes.byref(mig)) == SUCCESS
        assert text(nvml, "nvmlDeviceGetName", mig) == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
        gi, ci = ctypes.c_uint(), ctypes.c_uint()
        assert nvml.nvmlDeviceGetGpuInstanceId(mig, ctypes.byref(gi)) == SUCCESS and gi.value == 2
        assert nvml.nvmlDeviceGetComputeInstanceId(mig, ctypes.byref(ci)) == SUCCESS and ci.value == 0
        attributes = DeviceAttributes()
        assert nvml.nvmlDeviceGetAttributes_v2(mig, ctypes.byref(attributes)) == SUCCESS
        assert (attributes.gpuInstanceSliceCount, attributes.memorySizeMB) == (3, 40448)


def test_unmodelled_and_wrong_calls_answer_errors_not_crashes(lib: Path, conf: Path) -> None:
    with loaded(lib, conf) as nvml:
        first, l40s = handle(nvml, 0), handle(nvml, 1)
        mode = ctypes.c_uint()
        assert nvml.nvmlDeviceGetMigMode(l40s, ctypes.byref(mode), ctypes.byref(mode)) == NOT_SUPPORTED
        assert nvml.nvmlDeviceGetPciInfo(first, None) == NOT_SUPPORTED
        assert nvml.nvmlDeviceGetProcessUtilization(first, None, None, ctypes.c_ulonglong(0)) == NOT_SUPPORTED
        assert nvml.nvmlDeviceGetGpuInstanceId(first, ctypes.byref(mode)) == NOT_SUPPORTED
        bogus = ctypes.c_void_p(0x1234)
        assert nvml.nvmlDeviceGetName(bogus, ctypes.create_string_buffer(64), 64) == INVALID_ARGUMENT
        assert nvml.nvmlDeviceGetName(first, ctypes.create_string_buffer(8), 8) == INSUFFICIENT_SIZE
        device = ctypes.c_void_p()
        assert nvml.nvmlDeviceGetHandleByIndex_v2(2, ctypes.byref(device)) == INVALID_ARGUMENT


def test_clocks_slurm_lists_and_sets(lib: Path, conf: Path) -> None:
    with loaded(lib, conf) as nvml:
        gpu = handle(nvml, 0)
        count = ctypes.c_uint(0)
        assert nvml.nvmlDeviceGetSupportedMemoryClocks(gpu, ctypes.byref(count), None) == INSUFFICIENT_SIZE
        mem = (ctypes.c_uint * 1)()
        assert nvml.nvmlDeviceGetSupportedMemoryClocks(gpu, ctypes.byref(count), mem) == SUCCESS and mem[0] == 2619
        gfx = (ctypes.c_uint * 200)()
        count = ctypes.c_uint(200)
        assert nvml.nvmlDeviceGetSupportedGraphicsClocks(gpu, 2619, ctypes.byref(count), gfx) == SUCCESS
        assert (gfx[0], gfx[count.value - 1]) == (1980, 210)
        assert nvml.nvmlDeviceSetApplicationsClocks(gpu, 2619, 1410) == SUCCESS
        clock = ctypes.c_uint()
        assert nvml.nvmlDeviceGetApplicationsClock(gpu, 0, ctypes.byref(clock)) == SUCCESS and clock.value == 1410
        assert nvml.nvmlDeviceResetApplicationsClocks(gpu) == SUCCESS
        assert nvml.nvmlDeviceGetApplicationsClock(gpu, 0, ctypes.byref(clock)) == SUCCESS and clock.value == 1980
