"""FSDP training that survives a time limit or a preemption: sharded checkpoints, requeue, resume.

Every --checkpoint-every steps, and at once when asked to stop, every rank writes its own shards
of the model and optimizer with torch.distributed.checkpoint into CKPT_DIR/step-N; rank 0 then
writes N into CKPT_DIR/latest. A run that finds `latest` loads that checkpoint and carries on from
the next step, with the same data it would have seen: a requeued job ends where an uninterrupted
one would.

Asking to stop: fsdp.sbatch touches CKPT_DIR/stop-requested when Slurm sends it USR1 (before the
time limit, or on `scancel --batch --signal=USR1 JOB`). Rank 0 looks for that file before each step
and tells the others, so all ranks stop at the same step, checkpointed; rank 0 writes that step
into CKPT_DIR/stopped, and the batch script requeues the job.

    torchrun --nproc_per_node=2 fsdp_checkpoint.py --ckpt-dir /shared/me/ckpt
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from train import FEATURES, CLASSES, make_data, start_process_group  # this directory's train.py


class Training(Stateful):
    """What a checkpoint holds: model and optimizer, each rank its own shards."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict[str, Any]:
        model_state, optimizer_state = get_state_dict(self.model, self.optimizer)
        return {"model": model_state, "optimizer": optimizer_state}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        set_state_dict(self.model, self.optimizer,
                       model_state_dict=state["model"], optim_state_dict=state["optimizer"])


def sharded_model(hidden: int, device: torch.device) -> torch.nn.Module:
    model = torch.nn.Sequential(
        torch.nn.Linear(FEATURES, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, CLASSES),
    ).to(device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)  # each layer's parameters split over all ranks
    fully_shard(model, mesh=mesh)  # shards in place: `model` is now an FSDP module too
    return model


def stop_requested(ckpt_dir: Path, device: torch.device) -> bool:
    """Rank 0 looks for the file; every rank gets its answer, so all stop at the same step."""
    flag = torch.tensor([int(dist.get_rank() == 0 and (ckpt_dir / "stop-requested").exists())], device=device)
    dist.broadcast(flag, src=0)
    return bool(flag.item())


def save(training: Training, ckpt_dir: Path, step: int) -> None:
    dcp.save({"training": training}, checkpoint_id=str(ckpt_dir / f"step-{step}"))
    dist.barrier()  # every rank's shards are written before `latest` names them
    if dist.get_rank() == 0:
        (ckpt_dir / "latest.tmp").write_text(f"{step}\n")
        os.replace(ckpt_dir / "latest.tmp", ckpt_dir / "latest")
        steps = sorted(int(path.name.removeprefix("step-")) for path in ckpt_dir.glob("step-*"))
        for old in steps[:-2]:  # keep this checkpoint and the one before it
            shutil.rmtree(ckpt_dir / f"step-{old}", ignore_errors=True)


def resume(training: Training, ckpt_dir: Path) -> int:
    """The step of the latest complete checkpoint, loaded into ``training``; 0 without one. Rank 0
    reads `latest` and tells the others: on a shared file system with attribute caching, ranks on
    other nodes could otherwise see another version of it and load another checkpoint."""
    found = [int((ckpt_dir / "latest").read_text()) if (ckpt_dir / "latest").exists() else 0]
    dist.broadcast_object_list(found, src=0)
    if found[0]:
        dcp.load({"training": training}, checkpoint_id=str(ckpt_dir / f"step-{found[0]}"))
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ckpt-dir", type=Path, required=True, help="on storage every node sees")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--checkpoint-every", type=int, default=20, help="steps between checkpoints (>= 1)")
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds to wait after each step: slows this toy down to watch a checkpoint")
    args = parser.parse_args()
    if args.checkpoint_every < 1:
        parser.error("--checkpoint-every must be at least 1")

    device = start_process_group()
    rank = dist.get_rank()
    args.ckpt_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    model = sharded_model(args.hidden, device)
    training = Training(model, torch.optim.AdamW(model.parameters(), lr=args.lr))
    start = resume(training, args.ckpt_dir)
    if rank == 0:
        print(f"resumed from the checkpoint of step {start}" if start else "no checkpoint: starting at step 1",
              flush=True)

    value, saved, step = float("nan"), start, start
    while step < args.steps:
        # Asked to stop before this step: save what the last step left, unless a periodic save
        # already did (a signal during that save must not cost a second one).
        if stop_requested(args.ckpt_dir, device):
            if saved != step:
                save(training, args.ckpt_dir, step)
            if rank == 0:
                (args.ckpt_dir / "stopped").write_text(f"{step}\n")
                print(f"stop requested: checkpoint step-{step} written, leaving for the requeue", flush=True)
            break
        step += 1
        # The batch depends only on (seed, step, rank): a resumed run sees the same data.
        inputs, labels = make_data(seed=(args.seed * 100_000 + step) * 1_000 + rank, samples=args.batch_size)
        training.optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs.to(device)), labels.to(device))
        loss.backward()
        training.optimizer.step()
        value = loss.item()
        time.sleep(args.pause)
        if step % args.checkpoint_every == 0:
            save(training, args.ckpt_dir, step)
            saved = step
            if rank == 0:
                print(f"step {step}/{args.steps} loss {value:.4f}: checkpoint step-{step} written", flush=True)
    else:
        if rank == 0:
            print(f"finished: step {args.steps}" + (f" loss {value:.4f}" if step > start else " (already done)"),
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    os._exit(code)  # see train.py: gloo's threads can abort a normal interpreter shutdown
