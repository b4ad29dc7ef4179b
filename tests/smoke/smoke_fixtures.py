"""Result documents shaped like the ones training/*.py write, for the verdict tests; and a check
run where it cannot run, for the checks' skip reasons."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster_cli.smoke.context import CheckContext
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.target import SmokeTarget


def skip_reason(check: Callable[[CheckContext], CheckResult], **target: object) -> str:
    """Why ``check`` skips on a two-node target with ``target``'s fields (no session: a check that
    tried to run a command would fail here)."""
    context = CheckContext(SmokeTarget(**{"nodes": ["n1", "n2"], "work_dir": Path("/w"), **target}),  # type: ignore[arg-type]
                           session=None, run_id="r", run_home=None, training_dir=Path("/t"), config={})  # type: ignore[arg-type]
    result = check(context)
    assert result.verdict is Verdict.SKIP
    return result.reason


def env(device: str = "cpu", world: int = 3, gpu_name: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "world_size": world,
        "nodes": [f"n{i}" for i in range(world)],
        "nnodes": world,
        "backend": "nccl" if device == "cuda" else "gloo",
        "device": device,
    }
    if gpu_name:
        data["gpu_name"] = gpu_name
    return data


def allreduce(
    busbw: float, device: str = "cpu", world: int = 3, correct: bool = True, **env_kw: Any
) -> dict[str, Any]:
    factor = 2 * (world - 1) / world
    sizes = [
        {
            "bytes": size,
            "time_us": 1.0,
            "algbw_gbps": busbw / factor if factor else 0.0,
            "busbw_gbps": busbw,
            "correct": True,
        }
        for size in (4096, 2**20, 2**30)
    ]
    sizes[1]["correct"] = correct
    return {
        "check": "allreduce",
        "env": env(device, world, **env_kw),
        "sizes": sizes,
        "largest": sizes[-1],
        "all_correct": correct,
    }


def ddp(samples_per_s: float, device: str = "cpu", world: int = 3, **overrides: Any) -> dict[str, Any]:
    data = {
        "check": "ddp",
        "env": env(device, world),
        "loss_first": 2.3,
        "loss_last": 2.1,
        "loss_decreased": True,
        "params_identical": True,
        "param_digests": ["abc"] * world,
        "samples_per_s": samples_per_s,
        "step_time_ms": 10.0,
    }
    data.update(overrides)
    return data


def fsdp(**overrides: Any) -> dict[str, Any]:
    saved = {"model_full": "m1", "optimizer_full": "o1", "local_shards": "s1"}
    data = {
        "check": "fsdp",
        "env": env(),
        "impl": "fsdp2",
        "steps": 12,
        "loss_decreased": True,
        "step_time_ms": 120.0,
        "save_s": 0.1,
        "load_s": 0.05,
        "checkpoint_dir": "/shared/ckpt",
        "checkpoint_files": [".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp"],
        "reload_equal": True,
        "reload_was_needed": True,
        "digests": [
            {"saved": saved, "loaded": dict(saved), "before": {"model_full": "m0"}} for _ in range(3)
        ],
    }
    data.update(overrides)
    return data


def preempt(
    resumed_from: int | None = 5,
    restart_count: int = 1,
    status: str = "completed",
    bitwise: bool | None = True,
    diff: float = 0.0,
    device: str = "cpu",
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "check": "preempt",
        "env": env(device),
        "status": status,
        "restart_count": restart_count,
        "resumed_from_step": resumed_from,
        "final_digest": "d1",
    }
    if bitwise is not None:  # only a completed run compares itself with an uninterrupted one
        data.update(bitwise_equal=bitwise, max_abs_diff=diff, reference_digest="d1" if bitwise else "d2")
    return data


def gpu(per_gpu: list[tuple[float, float]], name: str = "NVIDIA H100 80GB HBM3") -> dict[str, Any]:
    gpus = [
        {"node": "g1", "local_rank": index, "gpu_name": name, "matmul_bf16_tflops": tflops, "copy_tbps": tbps}
        for index, (tflops, tbps) in enumerate(per_gpu)
    ]
    return {"check": "gpu", "skipped": False, "env": env("cuda", len(gpus), name), "gpus": gpus}
