"""The proof's steps that watch the GPUs while Slurm gives them out: the device cgroup (a job is
denied the GPUs it was not given) and the GPU exporter's figures, one scrape taken while a job
holds every GPU. Each takes the running ``Proof`` and writes its step's verdict."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from cluster_cli.gpu_proof import daemons, machine
from cluster_cli.gpu_proof.record import FAIL, PASS, SKIP

if TYPE_CHECKING:
    from cluster_cli.gpu_proof.steps import Proof

METRICS_JOB = "gpu-proof-metrics"
#: Holds a CUDA context and 256 MiB on every GPU the job was given, until it is cancelled.
HOLD_GPUS = """
import time, torch
held = [torch.empty(256 << 20, dtype=torch.uint8, device=f"cuda:{i}") for i in range(torch.cuda.device_count())]
print("holding", len(held), flush=True)
time.sleep(110)
"""
#: Prints "open" or "denied" for each device file named: what the job's device cgroup allows.
OPEN_PROBE = """
import os, sys
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDWR))
        print("open")
    except PermissionError:
        print("denied")
"""


# 6. the device cgroup: a job is denied the GPUs it was not given
def device_cgroup(proof: Proof) -> None:
    started = time.monotonic()
    if not proof.cgroups_used:
        proof.step("device-cgroup", SKIP, "no cgroups here: binding is checked by CUDA_VISIBLE_DEVICES only",
                   started)
        return
    if not proof.device_files:
        proof.step("device-cgroup", SKIP, "gpu/nvml named no device file", started)
        return
    srun = ["srun", "--nodes=1", "--ntasks=1", "--time=2"]
    probe = [proof.args.python, "-c", OPEN_PROBE, *proof.device_files]
    without = daemons.run(proof.layout, [*srun, "--gres=none", *probe], timeout=120)
    with_all = daemons.run(proof.layout, [*srun, f"--gres=gpu:{len(proof.device_files)}", *probe], timeout=120)
    seen = {"without GPUs": without.stdout.split(), "with every GPU": with_all.stdout.split()}
    want = {"without GPUs": ["denied"] * len(proof.device_files), "with every GPU": ["open"] * len(proof.device_files)}
    if seen != want:
        proof.step("device-cgroup", FAIL, f"device files {proof.device_files}: saw {seen}, expected {want} "
                   f"({(without.stderr + with_all.stderr).strip()[-300:]})", started, seen=seen)
        return
    proof.step("device-cgroup", PASS, f"a job without GPUs is denied {', '.join(proof.device_files)}; a job "
               "given them opens them (ConstrainDevices, cgroup v2)", started, seen=seen)


# 7. the GPU exporter's figures, one of them taken while a job holds every GPU
def gpu_metrics(proof: Proof) -> None:
    started = time.monotonic()
    try:
        import pynvml

        from cluster_cli.exporters import gpu_metrics
    except ImportError as error:
        proof.step("gpu-metrics", SKIP, f"no NVML binding in this Python ({error})", started)
        return
    holder = None if proof.args.fake_gpus else _hold_gpus(proof)
    try:
        scrape, held_job = _scrape_until_held(proof, gpu_metrics, pynvml, holder)
    finally:
        if holder is not None:
            daemons.run(proof.layout, ["scancel", "--name", METRICS_JOB])
            holder.wait(timeout=60)
    problems = metrics_problems(scrape.samples, proof.gpus, held_job if holder else None)
    details = {"samples": len(scrape.samples), "errors": scrape.errors, "job": held_job,
               "exposition": gpu_metrics.exposition(scrape)[-4000:]}
    if problems:
        proof.step("gpu-metrics", FAIL, "; ".join(problems), started, **details)
        return
    held = f"; job {held_job} named on every GPU it held" if holder else "; no job held the emulated GPUs"
    proof.step("gpu-metrics", PASS, f"{len(scrape.samples)} samples from NVML (nvidia-ml-py), memory total "
               f"equal to nvidia-smi's, temperature and power in range{held}", started, **details)


def _hold_gpus(proof: Proof) -> Any:
    import subprocess

    argv = ["srun", f"--job-name={METRICS_JOB}", "--nodes=1", "--ntasks=1", f"--gres=gpu:{len(proof.gpus)}",
            "--time=2", proof.args.python, "-c", HOLD_GPUS]
    return subprocess.Popen(argv, env=proof.layout.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _scrape_until_held(proof: Proof, gpu_metrics: Any, nvml: Any, holder: Any) -> tuple[Any, str]:
    """A scrape, and the job it names on the GPUs ("" for none); with a holder, the first scrape
    that names a job on every GPU (60 s at most)."""
    deadline = time.monotonic() + 60
    while True:
        scrape = gpu_metrics.collect(nvml)
        jobs = [labels.get("slurm_job_id") for name, labels, _ in scrape.samples if name == "slurm_job"]
        held = str(jobs[0]) if holder is not None and jobs and all(jobs) else ""
        if holder is None or (len(jobs) >= len(proof.gpus) and all(jobs)) or time.monotonic() > deadline:
            return scrape, held
        if holder.poll() is not None:
            return scrape, held
        time.sleep(1)


def metrics_problems(samples: list[tuple[str, dict[str, str], float]], gpus: list[machine.Gpu],
                     job: str | None) -> list[str]:
    """What in a scrape disagrees with nvidia-smi or with the job that held the GPUs."""
    def values(metric: str) -> dict[str, float]:
        return {labels["uuid"]: value for name, labels, value in samples if name == metric}

    problems = []
    info = values("info")
    if sorted(info) != sorted(gpu.uuid for gpu in gpus):
        problems.append(f"the exporter lists GPUs {sorted(info)}, nvidia-smi {sorted(g.uuid for g in gpus)}")
    total = values("memory_total_bytes")
    for gpu in gpus:
        if int(total.get(gpu.uuid, 0)) >> 20 != gpu.memory_mib:
            problems.append(f"GPU {gpu.index}: memory total {int(total.get(gpu.uuid, 0)) >> 20} MiB, nvidia-smi "
                            f"{gpu.memory_mib} MiB")
    for metric, low, high in (("temperature_celsius", 1, 120), ("power_watts", 0.001, 2000),
                              ("utilization_ratio", 0, 1)):
        for uuid, value in values(metric).items():
            if not low <= value <= high:
                problems.append(f"{uuid}: {metric} {value} outside {low}..{high}")
    if job is not None:
        jobs = {labels["uuid"]: labels["slurm_job_id"] for name, labels, _ in samples if name == "slurm_job"}
        missing = [gpu.uuid for gpu in gpus if jobs.get(gpu.uuid) != job]
        if not job or missing:
            problems.append(f"the job holding the GPUs ({job or 'none seen'}) is not named on {missing or 'them'}")
    return problems
