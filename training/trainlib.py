"""Shared pieces of the validation jobs: process-group setup, seeded synthetic data, the model,
bandwidth arithmetic and the JSON result file.

The scripts beside this file import it as ``trainlib`` (a script's own directory is first on
sys.path under ``torchrun script.py``). Only torch and the standard library are used, so the
jobs run in any environment that has torch; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

SCHEMA_VERSION = 1
DEFAULT_TIMEOUT_S = 120


# ---------------------------------------------------------------- arithmetic (no torch needed)


def algbw_gbps(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 bytes/s): payload size over time per operation (nccl-tests)."""
    if seconds <= 0:
        raise ValueError("seconds must be positive")
    return nbytes / seconds / 1e9


def allreduce_bus_factor(world_size: int) -> float:
    """nccl-tests bus-bandwidth factor for all_reduce: 2(n-1)/n."""
    if world_size < 1:
        raise ValueError("world_size must be at least 1")
    return 2.0 * (world_size - 1) / world_size


def busbw_gbps(algbw: float, world_size: int) -> float:
    """Bus bandwidth of an all_reduce: algbw * 2(n-1)/n, comparable across rank counts."""
    return algbw * allreduce_bus_factor(world_size)


def matmul_tflops(m: int, n: int, k: int, seconds: float) -> float:
    """Dense matmul rate: 2*m*n*k floating point operations per product."""
    if seconds <= 0:
        raise ValueError("seconds must be positive")
    return 2.0 * m * n * k / seconds / 1e12


def copy_tbps(nbytes: int, seconds: float) -> float:
    """Device copy bandwidth in TB/s counting read + write (2 x bytes), as STREAM copy does."""
    if seconds <= 0:
        raise ValueError("seconds must be positive")
    return 2.0 * nbytes / seconds / 1e12


def payload_sizes(min_bytes: int, max_bytes: int, factor: int = 4) -> list[int]:
    """Geometric ladder of payload sizes from min to max inclusive (max is always the last)."""
    if min_bytes <= 0 or max_bytes < min_bytes or factor < 2:
        raise ValueError("need 0 < min_bytes <= max_bytes and factor >= 2")
    sizes = []
    size = min_bytes
    while size < max_bytes:
        sizes.append(size)
        size *= factor
    sizes.append(max_bytes)
    return sizes


def parse_size(text: str) -> int:
    """``64M`` / ``1G`` / ``4096`` -> bytes (binary units)."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


# ---------------------------------------------------------------- distributed setup


@dataclass(frozen=True)
class Dist:
    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: Any  # torch.device
    node: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def pick_backend() -> str:
    """NCCL when a CUDA device is usable, gloo otherwise (CPU, or fake GPU device files)."""
    import torch
    import torch.distributed as dist

    if torch.cuda.is_available() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def node_name() -> str:
    """The Slurm node this rank runs on (SLURMD_NODENAME under srun), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


def init_distributed(timeout_s: int = DEFAULT_TIMEOUT_S) -> Dist:
    """Join the process group torchrun describes in RANK / WORLD_SIZE / MASTER_ADDR."""
    import torch
    import torch.distributed as dist

    backend = pick_backend()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if "RANK" not in os.environ:  # plain `python script.py`: a world of one
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group(backend=backend, timeout=_dt.timedelta(seconds=timeout_s))
    return Dist(dist.get_rank(), dist.get_world_size(), local_rank, backend, device, node_name())


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def shutdown() -> None:
    """Leave the process group together: every rank reaches the barrier, then destroys it."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def exit_without_finalization(code: int = 0) -> NoReturn:
    """End the process now, skipping the interpreter's finalization.

    Why (torch 2.13, gloo; seen in gdb on a loaded 2-core machine, about 1 run in 10 with 3
    ranks): a gloo worker thread (``pt_gloo_runloop``) frees a finished work item (the barrier
    and the all_gather before it) a moment after the main thread saw it complete. Those works
    hold tensors that Python owns, so freeing them takes the GIL; once the main thread is in
    ``Py_FinalizeEx`` that makes the worker ``pthread_exit``, whose unwinding through a noexcept
    destructor calls ``std::terminate``: "terminate called without an active exception", SIGABRT
    with no Python frame. torchrun then fails the launch and srun cancels the healthy ranks.
    destroy_process_group does not prevent it: objects still holding the group (DDP's reducer)
    keep its threads alive until finalization. By the time this runs the results are on disk and
    every rank has left the group, so there is nothing left to finalize.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def gather_objects(obj: Any) -> list[Any]:
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def synchronize(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def slowest(seconds: float, device: Any) -> float:
    """The largest value over all ranks: the slowest rank sets the pace of a synchronous step."""
    import torch
    import torch.distributed as dist

    value = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def train_step(
    model: Any, optimizer: Any, loss_fn: Any, inputs: Any, labels: Any, device: Any
) -> tuple[float, float]:
    """One optimizer step on one batch; returns (seconds incl. device work, loss averaged over ranks)."""
    import torch.distributed as dist

    inputs, labels = inputs.to(device), labels.to(device)
    with timed(device) as elapsed:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(inputs), labels)
        loss.backward()
        optimizer.step()
    global_loss = loss.detach().clone()
    dist.all_reduce(global_loss)
    return elapsed[0], float(global_loss.item()) / dist.get_world_size()


LOSS_WINDOW = 3


def loss_window_means(losses: list[float], window: int = LOSS_WINDOW) -> tuple[float, float]:
    """Mean loss of the first and of the last ``window`` steps (the loss "fell" when last < first)."""
    if len(losses) < 2 * window:
        raise ValueError(f"need at least {2 * window} losses")
    return sum(losses[:window]) / window, sum(losses[-window:]) / window


@contextmanager
def timed(device: Any) -> Iterator[list[float]]:
    """``with timed(dev) as t: ...`` leaves the elapsed seconds in ``t[0]`` (device work included)."""
    box: list[float] = [0.0]
    synchronize(device)
    start = time.perf_counter()
    yield box
    synchronize(device)
    box[0] = time.perf_counter() - start


# ---------------------------------------------------------------- data and model


def make_dataset(seed: int, samples: int, in_dim: int, classes: int) -> Any:
    """Seeded synthetic classification data a small MLP can learn: labels from a fixed teacher."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(samples, in_dim, generator=generator)
    teacher = torch.randn(in_dim, classes, generator=generator)
    labels = (inputs @ teacher).argmax(dim=1)
    return torch.utils.data.TensorDataset(inputs, labels)


def make_mlp(seed: int, in_dim: int = 512, hidden: int = 1024, classes: int = 10) -> Any:
    """The 512-1024-1024-10 MLP used for every training check (same init on every rank)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(in_dim, hidden),
        nn.ReLU(),
        nn.Linear(hidden, hidden),
        nn.ReLU(),
        nn.Linear(hidden, classes),
    )


def tensors_digest(named_tensors: Iterator[tuple[str, Any]]) -> str:
    """sha256 over names, dtypes, shapes and raw bytes: equal digests mean bitwise-equal tensors."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(named_tensors, key=lambda item: item[0]):
        data = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}|".encode())
        digest.update(data.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


# ---------------------------------------------------------------- results


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--out",
        default=os.environ.get("SMOKE_RESULT"),
        help="JSON result file written by rank 0 (default: $SMOKE_RESULT, else stdout only)",
    )
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SMOKE_SEED", "1234")))
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="collective timeout, seconds")
    return parser


IMAGE_MARKER = "/etc/cluster-cli-image"


def _image_marker() -> str | None:
    try:
        with open(IMAGE_MARKER, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def environment(info: Dist) -> dict[str, Any]:
    import torch

    nodes = sorted(set(gather_objects(info.node)))
    env: dict[str, Any] = {
        "world_size": info.world_size,
        "nodes": nodes,
        "nnodes": len(nodes),
        "backend": info.backend,
        "device": info.device.type,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "threads_per_rank": torch.get_num_threads(),
        # what made the container image the ranks run in (container_image.py); None: not in one
        "image": _image_marker(),
    }
    if info.device.type == "cuda":
        env["gpu_name"] = torch.cuda.get_device_name(info.device)
    return env


def run(main: Callable[[], None]) -> NoReturn:
    """Run a script's main under torchrun's ``@record``: a worker's exception (message and
    traceback) then appears in torchrun's "Root Cause" report instead of "To enable traceback see".
    A main that returns has written its results and left the process group: the process then
    ends without finalization (see exit_without_finalization); an exception still exits 1."""
    from torch.distributed.elastic.multiprocessing.errors import record

    record(main)()
    exit_without_finalization(0)


def write_result(path: str | None, payload: dict[str, Any]) -> None:
    """Write the result atomically (temp file + rename) and echo it on stdout."""
    document = {"schema_version": SCHEMA_VERSION, **payload}
    text = json.dumps(document, indent=2, sort_keys=True, default=str)
    print(text, flush=True)
    if path:
        write_atomic(Path(path), text + "\n")


def write_atomic(path: Path, text: str) -> None:
    """Readers on other nodes see the old file or the whole new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
