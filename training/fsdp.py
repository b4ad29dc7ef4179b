"""FSDP training plus a sharded checkpoint through torch.distributed.checkpoint (DCP).

FSDP2 (``fully_shard``) by default; ``--impl fsdp1`` uses FullyShardedDataParallel, with
``device_id=torch.device("cpu")`` on CPU. After a few steps every rank saves its shards with
``dcp.save`` into a directory all ranks can read, a freshly initialised (differently seeded) model
loads them with ``dcp.load``, and the reload must equal what was saved, bitwise: the gathered full
model state, each rank's local shards and the optimizer state.

    torchrun --standalone --nproc_per_node=2 training/fsdp.py --ckpt-dir /tmp/fsdp-ckpt --out result.json
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import trainlib


def shard(model: Any, impl: str, info: trainlib.Dist) -> Any:
    import torch

    if impl == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh(info.device.type, (info.world_size,))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    from torch.distributed.fsdp import FullyShardedDataParallel

    device_id = info.device if info.device.type == "cuda" else torch.device("cpu")
    return FullyShardedDataParallel(model, device_id=device_id, use_orig_params=True)


def local_shards(model: Any) -> list[tuple[str, Any]]:
    """This rank's own piece of every parameter (DTensor local shard, or the flat FSDP1 view)."""
    shards = []
    for name, param in model.named_parameters():
        local = param.to_local() if hasattr(param, "to_local") else param
        shards.append((name, local))
    return shards


def full_state(model: Any, optimizer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True)
    return (
        get_model_state_dict(model, options=options),
        get_optimizer_state_dict(model, optimizer, options=options),
    )


def flatten(prefix: str, value: Any) -> list[tuple[str, Any]]:
    """Nested optimizer state -> (dotted name, tensor) pairs; plain numbers become tensors."""
    import torch

    if isinstance(value, dict):
        return [item for key, sub in value.items() for item in flatten(f"{prefix}.{key}", sub)]
    if isinstance(value, (list, tuple)):
        return [item for index, sub in enumerate(value) for item in flatten(f"{prefix}.{index}", sub)]
    if isinstance(value, torch.Tensor):
        return [(prefix, value.full_tensor() if hasattr(value, "full_tensor") else value)]
    return [(prefix, torch.tensor(float(value)))] if isinstance(value, (int, float)) else []


def digests(model: Any, optimizer: Any) -> dict[str, str]:
    model_state, optim_state = full_state(model, optimizer)
    return {
        "model_full": trainlib.tensors_digest(iter(model_state.items())),
        "optimizer_full": trainlib.tensors_digest(iter(flatten("optim", optim_state))),
        "local_shards": trainlib.tensors_digest(iter(local_shards(model))),
    }


def build(seed: int, impl: str, info: trainlib.Dist, lr: float) -> tuple[Any, Any]:
    import torch

    model = shard(trainlib.make_mlp(seed).to(info.device), impl, info)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    return model, optimizer


def main() -> None:
    parser = trainlib.base_parser(__doc__ or "")
    parser.add_argument("--impl", choices=["fsdp2", "fsdp1"], default="fsdp2")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--ckpt-dir", required=True, help="directory every rank can read and write")
    args = parser.parse_args()
    if args.steps < 2 * trainlib.LOSS_WINDOW or args.warmup_steps >= args.steps:
        parser.error(f"--steps must be >= {2 * trainlib.LOSS_WINDOW} and > --warmup-steps")

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    info = trainlib.init_distributed(args.timeout)
    env = trainlib.environment(info)
    dataset = trainlib.make_dataset(args.seed + info.rank, args.batch_size * args.steps, 512, 10)
    model, optimizer = build(args.seed, args.impl, info, args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses, step_times = [], []
    for step in range(args.steps):
        inputs, labels = dataset[step * args.batch_size : (step + 1) * args.batch_size]
        seconds, loss = trainlib.train_step(model, optimizer, loss_fn, inputs, labels, info.device)
        step_times.append(seconds)
        losses.append(loss)

    ckpt = Path(args.ckpt_dir)
    if info.is_main and ckpt.exists():
        shutil.rmtree(ckpt)
    dist.barrier()
    saved = digests(model, optimizer)
    model_state, optim_state = get_state_dict(model, optimizer)
    start = time.perf_counter()
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(ckpt))
    save_s = time.perf_counter() - start

    fresh_model, fresh_optimizer = build(args.seed + 1, args.impl, info, args.lr)
    # A throwaway step creates the optimizer state that dcp.load then overwrites in place.
    fresh_model(dataset[0:1][0].to(info.device)).sum().backward()
    fresh_optimizer.step()
    fresh_optimizer.zero_grad(set_to_none=True)
    before = digests(fresh_model, fresh_optimizer)
    model_state, optim_state = get_state_dict(fresh_model, fresh_optimizer)
    state: dict[str, Any] = {"model": model_state, "optim": optim_state}
    start = time.perf_counter()
    dcp.load(state, checkpoint_id=str(ckpt))
    load_s = time.perf_counter() - start
    set_state_dict(
        fresh_model, fresh_optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
    )
    loaded = digests(fresh_model, fresh_optimizer)
    per_rank = trainlib.gather_objects({"saved": saved, "loaded": loaded, "before": before})
    files = sorted(os.listdir(ckpt)) if ckpt.is_dir() else []
    timed = step_times[args.warmup_steps :]
    step_seconds = trainlib.slowest(sum(timed) / len(timed), info.device)
    first, last = trainlib.loss_window_means(losses)
    result: dict[str, Any] = {
        "check": "fsdp",
        "env": env,
        "impl": args.impl,
        "steps": args.steps,
        "losses": losses,
        "loss_decreased": last < first,
        "step_time_ms": step_seconds * 1e3,
        "checkpoint_dir": str(ckpt),
        "checkpoint_files": files,
        "save_s": save_s,
        "load_s": load_s,
        "reload_equal": all(rank["saved"] == rank["loaded"] for rank in per_rank),
        "reload_was_needed": all(
            rank["before"]["model_full"] != rank["saved"]["model_full"] for rank in per_rank
        ),
        "digests": per_rank,
    }
    if info.is_main:
        trainlib.write_result(args.out, result)
    trainlib.shutdown()


if __name__ == "__main__":
    trainlib.run(main)
