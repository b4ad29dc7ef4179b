"""DDP on a small MLP with DistributedSampler over seeded synthetic data.

Verdict inputs: the loss falls (mean of the last steps below the mean of the first steps), the
parameters are bitwise identical on every rank at the end, and the throughput in samples/s
(warm-up steps excluded). Scaling efficiency, thr_N / (N * thr_1), comes from running this at one
rank and at N ranks (the sbatch script does both when DDP_BASELINE=1).

    torchrun --standalone --nproc_per_node=2 training/ddp.py --out result.json
"""

from __future__ import annotations

from typing import Any

import trainlib


def main() -> None:
    parser = trainlib.base_parser(__doc__ or "")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup-steps", type=int, default=3, help="excluded from throughput")
    parser.add_argument("--batch-size", type=int, default=64, help="per rank")
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()
    if args.steps < 2 * trainlib.LOSS_WINDOW or args.warmup_steps >= args.steps:
        parser.error(f"--steps must be >= {2 * trainlib.LOSS_WINDOW} and > --warmup-steps")

    import torch
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    info = trainlib.init_distributed(args.timeout)
    env = trainlib.environment(info)
    # Enough samples that every rank sees a fresh batch each step of the first epoch.
    dataset = trainlib.make_dataset(args.seed, args.batch_size * info.world_size * args.steps, 512, 10)
    sampler: DistributedSampler[Any] = DistributedSampler(dataset, num_replicas=info.world_size, rank=info.rank, seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    model = trainlib.make_mlp(args.seed).to(info.device)
    device_ids = [info.device.index] if info.device.type == "cuda" else None
    ddp = DistributedDataParallel(model, device_ids=device_ids)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    losses: list[float] = []
    step_times: list[float] = []
    epoch = 0
    while len(losses) < args.steps:
        sampler.set_epoch(epoch)
        for inputs, labels in loader:
            if len(losses) == args.steps:
                break
            seconds, loss = trainlib.train_step(ddp, optimizer, loss_fn, inputs, labels, info.device)
            step_times.append(seconds)
            losses.append(loss)
        epoch += 1

    timed = step_times[args.warmup_steps :]
    seconds = trainlib.slowest(sum(timed), info.device)
    samples = len(timed) * args.batch_size * info.world_size
    digests = trainlib.gather_objects(trainlib.tensors_digest(model.named_parameters()))
    first, last = trainlib.loss_window_means(losses)
    result: dict[str, Any] = {
        "check": "ddp",
        "env": env,
        "steps": args.steps,
        "batch_size_per_rank": args.batch_size,
        "losses": losses,
        "loss_first": first,
        "loss_last": last,
        "loss_decreased": last < first,
        "params_identical": len(set(digests)) == 1,
        "param_digests": digests,
        "step_time_ms": seconds / len(timed) * 1e3,
        "samples_per_s": samples / seconds,
    }
    if info.is_main:
        trainlib.write_result(args.out, result)
    trainlib.shutdown()


if __name__ == "__main__":
    trainlib.run(main)
