"""all_reduce bandwidth over a ladder of payload sizes (gloo on CPU, NCCL on GPU).

Figures follow nccl-tests: algbw = bytes / time per operation, busbw = algbw * 2(n-1)/n. Every
size is first checked for a correct sum. The verdict input is the bus bandwidth at the largest
payload (the smoke suite compares it with a per-GPU-type floor); CPU runs report the figure only.

    torchrun --standalone --nproc_per_node=2 training/allreduce.py --out result.json
"""

from __future__ import annotations

from typing import Any

import trainlib


def measure(info: trainlib.Dist, nbytes: int, warmup: int, iters: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    numel = max(1, nbytes // 4)
    tensor = torch.full((numel,), float(info.rank + 1), dtype=torch.float32, device=info.device)
    dist.all_reduce(tensor)
    expected = info.world_size * (info.world_size + 1) / 2
    correct_here = bool(torch.all(tensor == expected).item())
    flag = torch.tensor([0 if correct_here else 1], device=info.device)
    dist.all_reduce(flag)  # any rank wrong -> everyone reports wrong
    for _ in range(warmup):
        dist.all_reduce(tensor)
    dist.barrier()
    with trainlib.timed(info.device) as elapsed:
        for _ in range(iters):
            dist.all_reduce(tensor)
    seconds = elapsed[0] / iters
    seconds = trainlib.slowest(seconds, info.device)  # the slowest rank defines the collective's time
    algbw = trainlib.algbw_gbps(numel * 4, seconds)
    return {
        "bytes": numel * 4,
        "time_us": seconds * 1e6,
        "algbw_gbps": algbw,
        "busbw_gbps": trainlib.busbw_gbps(algbw, info.world_size),
        "correct": int(flag.item()) == 0,
    }


def main() -> None:
    parser = trainlib.base_parser(__doc__ or "")
    parser.add_argument("--min-bytes", type=trainlib.parse_size, default=trainlib.parse_size("4K"))
    parser.add_argument(
        "--max-bytes", type=trainlib.parse_size, default=None, help="default: 1G on GPU, 64M on CPU"
    )
    parser.add_argument("--factor", type=int, default=4, help="ratio between successive sizes")
    parser.add_argument("--warmup", type=int, default=None, help="default: 5 on GPU, 1 on CPU")
    parser.add_argument("--iters", type=int, default=None, help="default: 20 on GPU, 5 on CPU")
    args = parser.parse_args()

    info = trainlib.init_distributed(args.timeout)
    on_gpu = info.device.type == "cuda"
    max_bytes = args.max_bytes or trainlib.parse_size("1G" if on_gpu else "64M")
    warmup = args.warmup if args.warmup is not None else (5 if on_gpu else 1)
    iters = args.iters if args.iters is not None else (20 if on_gpu else 5)
    env = trainlib.environment(info)
    rows = [
        measure(info, size, warmup, iters)
        for size in trainlib.payload_sizes(args.min_bytes, max_bytes, args.factor)
    ]
    largest = rows[-1]
    if info.is_main:
        trainlib.write_result(
            args.out,
            {
                "check": "allreduce",
                "env": env,
                "dtype": "float32",
                "warmup": warmup,
                "iters": iters,
                "sizes": rows,
                "largest": largest,
                "all_correct": all(row["correct"] for row in rows),
            },
        )
    trainlib.shutdown()


if __name__ == "__main__":
    trainlib.run(main)
