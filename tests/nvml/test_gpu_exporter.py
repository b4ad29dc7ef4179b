"""cluster_cli.exporters.gpu_metrics read through NVIDIA's binding (nvidia-ml-py) from the NVML
emulator: every figure the emulator is told is the figure served, a process's Slurm job is found,
what a GPU does not support is left out, and /metrics is served over HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from nvml_emu import CONF_ENV, REPO, build, have_gcc

from cluster_cli.exporters import gpu_metrics

pytest.importorskip("pynvml", reason="nvidia-ml-py is in the test extra (pip install -e .[test])")
pytestmark = pytest.mark.skipif(not have_gcc(), reason="gcc is needed to build the NVML emulator")

CONF = """\
driver_version = 580.159.04
[gpu 0]
name = NVIDIA H200
uuid = GPU-00000000-0000-4000-8000-0000000000aa
memory_mib = 143771
memory_used_mib = 1024
utilization_gpu = 87
utilization_memory = 40
temperature_c = 45
power_mw = 312500
ecc_corrected = 3
processes = {pids}
[gpu 1]
name = NVIDIA H200
"""


@pytest.fixture(scope="module")
def lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("nvml-emulator")).parent


def _scrape(lib_dir: Path, conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib_dir), **{CONF_ENV: str(conf)}, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "cluster_cli.exporters.gpu_metrics", *args],
                          capture_output=True, text=True, env=env, timeout=60, check=False)


def test_every_configured_figure_is_served(lib_dir: Path, tmp_path: Path) -> None:
    conf = tmp_path / "nvml.conf"
    conf.write_text(CONF.format(pids="1:1024"))
    done = _scrape(lib_dir, conf, "--once")
    assert done.returncode == 0, done.stderr
    gpu0 = 'gpu="0",uuid="GPU-00000000-0000-4000-8000-0000000000aa"'
    for line in (f"cluster_gpu_utilization_ratio{{{gpu0}}} 0.87", f"cluster_gpu_memory_utilization_ratio{{{gpu0}}} 0.4",
                 f"cluster_gpu_memory_used_bytes{{{gpu0}}} {1024 << 20}",
                 f"cluster_gpu_memory_total_bytes{{{gpu0}}} {143771 << 20}",
                 f"cluster_gpu_temperature_celsius{{{gpu0}}} 45", f"cluster_gpu_power_watts{{{gpu0}}} 312.5",
                 f'cluster_gpu_ecc_errors_total{{{gpu0},type="corrected"}} 3',
                 f'cluster_gpu_ecc_errors_total{{{gpu0},type="uncorrected"}} 0',
                 f'cluster_gpu_info{{{gpu0},name="NVIDIA H200",driver="580.159.04"}} 1',
                 "cluster_gpu_exporter_errors 0", "# TYPE cluster_gpu_ecc_errors_total counter"):
        assert line in done.stdout.splitlines(), line
    assert done.stdout.count("cluster_gpu_info{") == 2


def test_the_job_of_each_process_on_a_gpu(lib_dir: Path, tmp_path: Path) -> None:
    in_job = subprocess.Popen(["sleep", "60"], env={"SLURM_JOB_ID": "4242", "PATH": "/usr/bin:/bin"})
    outside = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin"})
    try:
        conf = tmp_path / "nvml.conf"
        conf.write_text(CONF.format(pids=f"{in_job.pid}:1024,{outside.pid}:512"))
        out = _scrape(lib_dir, conf, "--once").stdout
    finally:
        in_job.kill()
        outside.kill()
    assert 'cluster_gpu_slurm_job{gpu="0",uuid="GPU-00000000-0000-4000-8000-0000000000aa",slurm_job_id="4242"} 1' in out
    assert 'slurm_job_id=""} 1' in out  # the process outside Slurm
    assert 'cluster_gpu_slurm_job{gpu="1"' not in out  # no process there


def test_a_cgroup_path_names_the_job_when_the_environment_does_not(tmp_path: Path) -> None:
    (tmp_path / "77").mkdir()
    (tmp_path / "77" / "environ").write_bytes(b"PATH=/bin\0")
    (tmp_path / "77" / "cgroup").write_text("0::/system.slice/node1_slurmstepd.scope/job_77/step_0/user/task_0\n")
    assert gpu_metrics.job_of(77, tmp_path) == "77"
    assert gpu_metrics.job_of(78, tmp_path) == ""


class _Error(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value


def _fake_nvml(ecc: int | None) -> SimpleNamespace:
    """A binding whose ECC call fails with ``ecc`` (None: succeeds), for what NVML may answer."""
    def total_ecc(handle: object, *args: object) -> int:
        if ecc is not None:
            raise _Error(ecc)
        return 0

    return SimpleNamespace(
        NVMLError=_Error, NVML_ERROR_NOT_SUPPORTED=3, NVML_TEMPERATURE_GPU=0, NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_AGGREGATE_ECC=1,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlSystemGetDriverVersion=lambda: "1",
        nvmlDeviceGetCount=lambda: 1, nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetUUID=lambda handle: "GPU-x", nvmlDeviceGetName=lambda handle: "NVIDIA T",
        nvmlDeviceGetMemoryInfo=lambda handle: SimpleNamespace(used=1, total=2),
        nvmlDeviceGetUtilizationRates=lambda handle: SimpleNamespace(gpu=5, memory=6),
        nvmlDeviceGetTemperature=lambda handle, sensor: 40, nvmlDeviceGetPowerUsage=lambda handle: 1000,
        nvmlDeviceGetTotalEccErrors=total_ecc, nvmlDeviceGetComputeRunningProcesses=lambda handle: [],
    )


def test_what_a_gpu_does_not_support_is_left_out_and_other_errors_are_counted() -> None:
    unsupported = gpu_metrics.collect(_fake_nvml(3))  # type: ignore[arg-type]
    assert not [s for s in unsupported.samples if s[0] == "ecc_errors_total"] and unsupported.errors == 0
    failing = gpu_metrics.collect(_fake_nvml(999))  # type: ignore[arg-type]
    assert failing.errors == 2 and ("exporter_errors", {}, 2) in failing.samples
    assert ("temperature_celsius", {"gpu": "0", "uuid": "GPU-x"}, 40) in failing.samples


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_metrics_are_served_over_http(lib_dir: Path, tmp_path: Path) -> None:
    conf = tmp_path / "nvml.conf"
    conf.write_text(CONF.format(pids=""))
    port = _free_port()
    env = dict(os.environ, LD_LIBRARY_PATH=str(lib_dir), **{CONF_ENV: str(conf)}, PYTHONPATH=str(REPO))
    server = subprocess.Popen([sys.executable, "-m", "cluster_cli.exporters.gpu_metrics",
                               f"--listen=127.0.0.1:{port}"], env=env)
    try:
        body = ""
        for _ in range(50):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                    body = answer.read().decode()
                    assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                break
            except urllib.error.URLError:
                time.sleep(0.1)
        assert "cluster_gpu_temperature_celsius" in body
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
    finally:
        server.terminate()
        server.wait(timeout=10)
