"""A small classifier trained with DistributedDataParallel: the file to replace with your model.

It runs unchanged in three ways:

    python train.py                          # one process: a laptop, or a shell from interactive.sh
    torchrun --nproc_per_node=2 train.py     # several processes on one node
    sbatch ddp.sbatch                        # several nodes: one torchrun per node (see ddp.sbatch)

Each process drives one GPU over NCCL; without a GPU the processes talk over gloo on the CPU.
The data is made up (points labelled by a fixed random "teacher" network), so the file needs no
download; put your dataset where make_data is.

--out writes the final metrics as JSON (sweep.py ranks the tasks of a sweep by them), --save the
trained weights (evaluate.py reads them). A loss that stops being a number (a learning rate far
too high) ends the run with exit code 3, so a sweep lists that task as failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

FEATURES, CLASSES = 32, 4


def make_data(seed: int, samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Points and the labels the teacher gives them; the teacher is the same for every seed."""
    teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(1234))
    inputs = torch.randn(samples, FEATURES, generator=torch.Generator().manual_seed(seed))
    return inputs, (inputs @ teacher).argmax(dim=1)


def make_model(hidden: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Linear(FEATURES, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, CLASSES)
    )


def evaluate(model: torch.nn.Module, device: torch.device) -> tuple[float, float]:
    """Loss and accuracy on 2,000 held-out points (the same on every rank)."""
    inputs, labels = make_data(seed=999, samples=2000)
    with torch.no_grad():
        logits = model(inputs.to(device))
        loss = torch.nn.functional.cross_entropy(logits, labels.to(device))
        accuracy = (logits.argmax(dim=1).cpu() == labels).float().mean()
    return float(loss), float(accuracy)


def start_process_group() -> torch.device:
    """Join the group torchrun describes (RANK, WORLD_SIZE, MASTER_ADDR...); alone without torchrun."""
    if "RANK" not in os.environ:
        with socket.socket() as probe:  # a port nobody else on this host uses
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if torch.cuda.is_available():
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
        return torch.device("cuda", local_rank)
    dist.init_process_group("gloo")
    return torch.device("cpu")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--out", type=Path, help="write the final metrics here as JSON")
    parser.add_argument("--save", type=Path, help="write the trained weights here")
    args = parser.parse_args()

    device = start_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = DistributedDataParallel(make_model(args.hidden).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    inputs, labels = make_data(seed=args.seed * 1000 + rank, samples=args.steps * args.batch_size)
    node = os.environ.get("SLURMD_NODENAME", os.uname().nodename)
    cpus = len(os.sched_getaffinity(0))  # what Slurm gave the job step on this node (--cpus-per-task)
    print(f"rank {rank} of {world} on {node}, device {device}, {cpus} CPUs", flush=True)

    value = 0.0
    for step in range(1, args.steps + 1):
        batch = slice((step - 1) * args.batch_size, step * args.batch_size)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs[batch].to(device)), labels[batch].to(device))
        loss.backward()  # DDP averages the gradients of all ranks here
        optimizer.step()
        value = loss.item()
        if not math.isfinite(value):
            print(f"rank {rank}: the loss is {value} at step {step}: diverged", flush=True)
            return 3
        if rank == 0 and (step % args.log_every == 0 or step == args.steps):
            print(f"step {step}/{args.steps} loss {value:.4f}", flush=True)

    if rank == 0:
        val_loss, accuracy = evaluate(model.module, device)
        metrics = {"train_loss": value, "val_loss": val_loss, "accuracy": accuracy,
                   "steps": args.steps, "world_size": world}
        print("metrics " + json.dumps(metrics), flush=True)
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(metrics) + "\n")
        if args.save:
            args.save.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"hidden": args.hidden, "weights": model.module.state_dict()}, args.save)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # os._exit, not a normal return: under gloo, torch 2.13's worker threads can abort the process
    # while Python shuts down (SIGABRT after the work is done, which fails the launch).
    os._exit(code)
