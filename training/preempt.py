"""Preemption: checkpoint on request, stop, resume at the same step, end where an uninterrupted run ends.

Data-parallel training of the MLP with a fixed gradient all_reduce per parameter (no DDP bucket
rebuilds, so the sum order is the same in every incarnation and the result is bitwise stable on
CPU). Rank 0 polls a flag file each step (the sbatch script touches it when Slurm delivers
SIGUSR1) and broadcasts the decision; on a request every rank stops at the same step, rank 0 saves
model + optimizer + step atomically and writes a ``preempted`` marker; the batch script then
requeues the job. A later incarnation finds the checkpoint and resumes from it.

``--hold-at-step K`` parks the first incarnation at step K (writing a ``holding`` marker) until
the flag appears or ``--hold-timeout`` passes, so a test harness can signal at a known step.
A run that completes then trains the same model from scratch without interruption, in the same
process group and with the same seed (``--reference-seed`` to change it), and reports whether the
final weights are bitwise equal and their largest absolute difference.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import trainlib


def flag_raised(flag: Path | None, device: Any) -> bool:
    """Rank 0 looks at the flag file; every rank gets the same answer."""
    import torch
    import torch.distributed as dist

    value = torch.tensor(
        [1 if (flag is not None and dist.get_rank() == 0 and flag.exists()) else 0], device=device
    )
    dist.broadcast(value, src=0)
    return bool(value.item())


def save_checkpoint(path: Path, model: Any, optimizer: Any, step: int) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, temporary)
    os.replace(temporary, path)


def data_parallel_step(model: Any, optimizer: Any, batch: tuple[Any, Any], world_size: int) -> float:
    import torch
    import torch.distributed as dist

    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(batch[0]), batch[1])
    loss.backward()
    for param in model.parameters():  # fixed order and layout: deterministic sums
        dist.all_reduce(param.grad)
        param.grad.div_(world_size)
    optimizer.step()
    return float(loss.item())


def main() -> None:
    parser = trainlib.base_parser(__doc__ or "")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--run-dir", required=True, help="shared directory: checkpoint and markers")
    parser.add_argument("--flag-file", default=None, help="preemption request (default RUN_DIR/preempt.flag)")
    parser.add_argument("--hold-at-step", type=int, default=0, help="first incarnation waits here (0: never)")
    parser.add_argument("--hold-timeout", type=float, default=60.0)
    parser.add_argument(
        "--reference-seed", type=int, default=None, help="seed of the uninterrupted run (default: --seed)"
    )
    args = parser.parse_args()

    import torch
    from torch.utils.data import DistributedSampler

    info = trainlib.init_distributed(args.timeout)
    env = trainlib.environment(info)
    run_dir = Path(args.run_dir)
    checkpoint = run_dir / "checkpoint.pt"
    flag = Path(args.flag_file or run_dir / "preempt.flag")
    steps_per_epoch = 8
    dataset = trainlib.make_dataset(args.seed, args.batch_size * info.world_size * steps_per_epoch, 512, 10)
    sampler: DistributedSampler[Any] = DistributedSampler(dataset, num_replicas=info.world_size, rank=info.rank, seed=args.seed)

    def build(seed: int) -> tuple[Any, Any]:
        model = trainlib.make_mlp(seed).to(info.device)
        return model, torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    def step_once(model: Any, optimizer: Any, step: int) -> float:
        epoch, index = divmod(step, steps_per_epoch)
        sampler.set_epoch(epoch)
        order = list(sampler)[index * args.batch_size : (index + 1) * args.batch_size]
        inputs, labels = dataset[order]
        return data_parallel_step(
            model, optimizer, (inputs.to(info.device), labels.to(info.device)), info.world_size
        )

    model, optimizer = build(args.seed)
    start_step = 0
    checkpoint_step = None
    if checkpoint.exists():
        state = torch.load(checkpoint, map_location=info.device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_step = checkpoint_step = int(state["step"])
    preempted_at = None
    losses: dict[int, float] = {}
    for step in range(start_step, args.steps):
        if args.hold_at_step and step == args.hold_at_step and checkpoint_step is None:
            if info.is_main:
                trainlib.write_atomic(run_dir / "holding", f"{step}\n")
            deadline = time.monotonic() + args.hold_timeout
            while not flag_raised(flag, info.device) and time.monotonic() < deadline:
                time.sleep(0.2)
        if flag_raised(flag, info.device):
            if info.is_main:
                save_checkpoint(checkpoint, model, optimizer, step)
                trainlib.write_atomic(run_dir / "preempted", f"{step}\n")
            preempted_at = step
            break
        losses[step] = step_once(model, optimizer, step)

    result: dict[str, Any] = {
        "check": "preempt",
        "env": env,
        "steps": args.steps,
        "restart_count": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
        "start_step": start_step,
        "resumed_from_step": checkpoint_step,
        "preempted_at_step": preempted_at,
        "status": "preempted" if preempted_at is not None else "completed",
        "losses": {str(step): loss for step, loss in losses.items()},
        "final_digest": trainlib.tensors_digest(model.named_parameters()),
    }
    if preempted_at is None:
        # The uninterrupted run: same ranks, a fresh model and optimizer, every step from 0.
        reference_seed = args.seed if args.reference_seed is None else args.reference_seed
        reference, reference_optimizer = build(reference_seed)
        for step in range(args.steps):
            step_once(reference, reference_optimizer, step)
        mine, theirs = model.state_dict(), reference.state_dict()
        result.update(
            reference_seed=reference_seed,
            reference_digest=trainlib.tensors_digest(reference.named_parameters()),
            bitwise_equal=all(torch.equal(mine[name], theirs[name]) for name in mine),
            max_abs_diff=max(float((mine[name] - theirs[name]).abs().max()) for name in mine),
        )
    if info.is_main:
        trainlib.write_result(args.out, result)
    trainlib.shutdown()


if __name__ == "__main__":
    trainlib.run(main)
