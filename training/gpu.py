"""Per-GPU bf16 dense matmul TFLOP/s and device memory copy bandwidth.

One rank per GPU (torchrun --nproc_per_node=<GPUs>); each measures its own device and rank 0
writes every GPU's figures. Matmul: C = A @ B with square bf16 matrices, 2*n^3 FLOP each.
Copy: ``dst.copy_(src)`` of a large buffer, counted as read + write (2 x bytes), as STREAM does.
Without a usable CUDA device (CPU-only torch, fake GPU device files) it writes a skip with the
reason instead of figures.
"""

from __future__ import annotations

import os
from typing import Any

import trainlib


def matmul_rate(device: Any, size: int, warmup: int, iters: int) -> float:
    import torch

    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    for _ in range(warmup):
        torch.matmul(a, b)
    with trainlib.timed(device) as elapsed:
        for _ in range(iters):
            torch.matmul(a, b)
    return trainlib.matmul_tflops(size, size, size, elapsed[0] / iters)


def copy_rate(device: Any, nbytes: int, warmup: int, iters: int) -> float:
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    for _ in range(warmup):
        dst.copy_(src)
    with trainlib.timed(device) as elapsed:
        for _ in range(iters):
            dst.copy_(src)
    return trainlib.copy_tbps(nbytes, elapsed[0] / iters)


def main() -> None:
    parser = trainlib.base_parser(__doc__ or "")
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--copy-bytes", type=trainlib.parse_size, default=trainlib.parse_size("2G"))
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        if os.environ.get("RANK", "0") != "0":
            return
        trainlib.write_result(
            args.out,
            {
                "check": "gpu",
                "skipped": True,
                "reason": f"no usable CUDA device (torch {torch.__version__}, "
                f"torch.cuda.is_available() is False)",
            },
        )
        return
    info = trainlib.init_distributed(args.timeout)
    env = trainlib.environment(info)
    mine = {
        "node": info.node,
        "local_rank": info.local_rank,
        "gpu_name": torch.cuda.get_device_name(info.device),
        "matmul_bf16_tflops": matmul_rate(info.device, args.matmul_size, args.warmup, args.iters),
        "copy_tbps": copy_rate(info.device, args.copy_bytes, args.warmup, args.iters),
    }
    per_gpu = trainlib.gather_objects(mine)
    if info.is_main:
        trainlib.write_result(
            args.out,
            {
                "check": "gpu",
                "skipped": False,
                "env": env,
                "matmul_size": args.matmul_size,
                "copy_bytes": args.copy_bytes,
                "gpus": per_gpu,
                "min_matmul_bf16_tflops": min(gpu["matmul_bf16_tflops"] for gpu in per_gpu),
                "min_copy_tbps": min(gpu["copy_tbps"] for gpu in per_gpu),
            },
        )
    trainlib.shutdown()


if __name__ == "__main__":
    trainlib.run(main)
