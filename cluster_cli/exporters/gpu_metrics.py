"""GPU metrics of one node from NVML, in Prometheus' text format: utilization, memory, temperature,
power, ECC error counts and the Slurm job using each GPU.

NVML is read through nvidia-ml-py (``pynvml``), NVIDIA's own binding. A value the GPU does not
report (NVML's NOT_SUPPORTED, e.g. ECC on a GPU without it) is left out, not written as 0; any
other NVML error is counted in ``cluster_gpu_exporter_errors`` and the rest is still served. The
job of a process is read from ``/proc`` (its ``SLURM_JOB_ID``, else the ``job_N`` of its cgroup),
which needs root: run as root, and listen only where the inventory says (the job ids are what
PrivateData hides from users).

    python -m cluster_cli.exporters.gpu_metrics --once            # print one scrape
    python -m cluster_cli.exporters.gpu_metrics --listen 127.0.0.1:9445
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from cluster_cli.exporters import text_format

PREFIX = "cluster_gpu_"
#: name -> (type, help)
METRICS = {
    "info": ("gauge", "1 per GPU, its name, UUID and driver version as labels"),
    "expected": ("gauge", "GPUs the inventory says this node has (--expect), for the fewer-GPUs alert"),
    "utilization_ratio": ("gauge", "share of the last sample period a kernel ran"),
    "memory_utilization_ratio": ("gauge", "share of the last sample period device memory was read or written"),
    "memory_used_bytes": ("gauge", "device memory in use"),
    "memory_total_bytes": ("gauge", "device memory in all"),
    "temperature_celsius": ("gauge", "GPU core temperature"),
    "power_watts": ("gauge", "power draw"),
    "ecc_errors_total": ("counter", "ECC memory errors since the counters were last cleared (aggregate)"),
    "slurm_job": ("gauge", "1 per Slurm job with a process on the GPU (slurm_job_id=\"\" for a process outside Slurm)"),
    "exporter_errors": ("gauge", "NVML calls of this scrape that failed other than NOT_SUPPORTED"),
    "exporter_scrape_seconds": ("gauge", "time this scrape took"),
}
_CGROUP_JOB = re.compile(r"/job_(\d+)(?:/|$)")


@dataclass
class Scrape:
    """The samples of one scrape: (metric, labels, value)."""

    samples: list[text_format.Sample] = field(default_factory=list)
    errors: int = 0

    def add(self, metric: str, labels: dict[str, str], value: float) -> None:
        self.samples.append((metric, labels, value))


def job_of(pid: int, proc: Path = Path("/proc")) -> str:
    """The Slurm job ``pid`` belongs to, "" when none (or when it cannot be read)."""
    try:
        environ = (proc / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        environ = []
    for entry in environ:
        if entry.startswith(b"SLURM_JOB_ID="):
            return entry.split(b"=", 1)[1].decode()
    try:
        found = _CGROUP_JOB.search((proc / str(pid) / "cgroup").read_text())
    except OSError:
        return ""
    return found.group(1) if found else ""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def collect(nvml: ModuleType, proc: Path = Path("/proc"), expect: int | None = None) -> Scrape:
    """One scrape of every GPU NVML lists; ``expect``: the count the inventory gives this node."""
    scrape = Scrape()
    started = time.monotonic()
    if expect is not None:
        scrape.add("expected", {}, expect)
    nvml.nvmlInit()
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        for index in range(nvml.nvmlDeviceGetCount()):
            _gpu(nvml, scrape, index, driver, proc)
    finally:
        nvml.nvmlShutdown()
    scrape.add("exporter_errors", {}, scrape.errors)
    scrape.add("exporter_scrape_seconds", {}, round(time.monotonic() - started, 6))
    return scrape


def _gpu(nvml: ModuleType, scrape: Scrape, index: int, driver: str, proc: Path) -> None:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    labels = {"gpu": str(index), "uuid": _text(nvml.nvmlDeviceGetUUID(handle))}
    scrape.add("info", {**labels, "name": _text(nvml.nvmlDeviceGetName(handle)), "driver": driver}, 1)

    def read(call: str, *args: Any) -> Any:
        try:
            return getattr(nvml, call)(handle, *args)
        except nvml.NVMLError as error:
            if error.value != nvml.NVML_ERROR_NOT_SUPPORTED:
                scrape.errors += 1
            return None

    memory = read("nvmlDeviceGetMemoryInfo")
    if memory is not None:
        scrape.add("memory_used_bytes", labels, memory.used)
        scrape.add("memory_total_bytes", labels, memory.total)
    utilization = read("nvmlDeviceGetUtilizationRates")
    if utilization is not None:
        scrape.add("utilization_ratio", labels, utilization.gpu / 100)
        scrape.add("memory_utilization_ratio", labels, utilization.memory / 100)
    for metric, value in (("temperature_celsius", read("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU)),
                          ("power_watts", _watts(read("nvmlDeviceGetPowerUsage")))):
        if value is not None:
            scrape.add(metric, labels, value)
    for kind, error_type in (("corrected", nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED),
                             ("uncorrected", nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)):
        count = read("nvmlDeviceGetTotalEccErrors", error_type, nvml.NVML_AGGREGATE_ECC)
        if count is not None:
            scrape.add("ecc_errors_total", {**labels, "type": kind}, count)
    processes = read("nvmlDeviceGetComputeRunningProcesses") or []
    for job in sorted({job_of(process.pid, proc) for process in processes}):
        # not `job`: Prometheus sets that label itself (the scrape job) and would rename this one
        scrape.add("slurm_job", {**labels, "slurm_job_id": job}, 1)


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000


def exposition(scrape: Scrape) -> str:
    """Prometheus' text format of one scrape."""
    return text_format.exposition(PREFIX, METRICS, scrape.samples)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpu_metrics", description=__doc__.split("\n\n")[0])
    parser.add_argument("--once", action="store_true", help="print one scrape and exit")
    parser.add_argument("--listen", default="127.0.0.1:9445", help="ADDRESS:PORT to serve /metrics on")
    parser.add_argument("--expect", type=int, help="GPUs the inventory gives this node")
    args = parser.parse_args(argv)
    import pynvml

    if args.once:
        sys.stdout.write(exposition(collect(pynvml, expect=args.expect)))
        return 0
    address, _, port = args.listen.rpartition(":")
    text_format.serve(lambda: exposition(collect(pynvml, expect=args.expect)), address, int(port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
