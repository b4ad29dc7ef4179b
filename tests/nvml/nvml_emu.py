"""Build and load the NVML emulator (roles/nvml_emulator/files) for the tests of tests/nvml."""

from __future__ import annotations

import ctypes
import glob
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterator

REPO = Path(__file__).resolve().parents[2]
SOURCE_DIR = REPO / "roles" / "nvml_emulator" / "files"
SOURCE = SOURCE_DIR / "nvml_emulator.c"
CONF_ENV = "CLUSTER_CLI_NVML_EMULATOR_CONF"
# roles/nvml_emulator's flags (vars/main.yml __nvml_emulator_cflags), warnings as errors.
CFLAGS = ["-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-fvisibility=hidden", "-shared",
          "-Wl,-soname,libnvidia-ml.so.1"]
PLUGIN_CACHE = Path(os.environ.get("CLUSTER_CLI_NVML_PLUGIN_CACHE", "/var/cache/cluster-cli/nvml-plugin"))

SUCCESS, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED = 0, 1, 2, 3
NOT_FOUND, INSUFFICIENT_SIZE, DRIVER_NOT_LOADED, UNKNOWN = 6, 7, 9, 999


class PciInfo(ctypes.Structure):
    """nvmlPciInfo_t"""

    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


class DeviceAttributes(ctypes.Structure):
    """nvmlDeviceAttributes_t"""

    _fields_ = [(name, ctypes.c_uint) for name in (
        "multiprocessorCount", "sharedCopyEngineCount", "sharedDecoderCount", "sharedEncoderCount",
        "sharedJpegCount", "sharedOfaCount", "gpuInstanceSliceCount", "computeInstanceSliceCount",
    )] + [("memorySizeMB", ctypes.c_ulonglong)]


def build(out_dir: Path) -> Path:
    """Compile the emulator into ``out_dir``/libnvidia-ml.so.1 (plus the unversioned link)."""
    lib = out_dir / "libnvidia-ml.so.1"
    subprocess.run(["gcc", *CFLAGS, "-o", str(lib), str(SOURCE)], check=True, capture_output=True, text=True)
    (out_dir / "libnvidia-ml.so").symlink_to("libnvidia-ml.so.1")
    return lib


def have_gcc() -> bool:
    return shutil.which("gcc") is not None


def nvml_header_dir() -> Path | None:
    """A directory with NVIDIA's nvml.h: CLUSTER_CLI_NVML_INCLUDE, the system's, or the plugin build's."""
    candidates = [os.environ.get("CLUSTER_CLI_NVML_INCLUDE", ""), "/usr/include", "/usr/local/cuda/include"]
    candidates += sorted(glob.glob(str(PLUGIN_CACHE / "*" / "work" / "nvml" / "include")))
    for directory in candidates:
        if directory and (Path(directory) / "nvml.h").is_file():
            return Path(directory)
    return None


@contextmanager
def loaded(lib: Path, conf: Path) -> Iterator[ctypes.CDLL]:
    """The emulator with ``conf``, initialised; shut down afterwards (the library keeps state)."""
    os.environ[CONF_ENV] = str(conf)
    nvml = ctypes.CDLL(str(lib))
    nvml.nvmlErrorString.restype = ctypes.c_char_p
    try:
        rc = nvml.nvmlInit_v2()
        assert rc == SUCCESS, f"nvmlInit_v2: {nvml.nvmlErrorString(rc)!r}"
        yield nvml
    finally:
        while nvml.nvmlShutdown() == SUCCESS:
            pass
        del os.environ[CONF_ENV]


def handle(nvml: ctypes.CDLL, index: int) -> ctypes.c_void_p:
    device = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(device)) == SUCCESS
    return device


def text(nvml: ctypes.CDLL, function: str, device: ctypes.c_void_p, size: int = 96) -> str:
    buffer = ctypes.create_string_buffer(size)
    assert getattr(nvml, function)(device, buffer, size) == SUCCESS
    return buffer.value.decode()
