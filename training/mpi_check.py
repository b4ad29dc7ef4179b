"""MPI through Slurm: every rank started by srun (PMIx or PMI-2), an all-reduce of the ranks'
numbers and the point-to-point latency between the first rank and the first rank of another node.

    srun --mpi=pmix --nodes=2 --ntasks-per-node=2 $TRAIN_PYTHON mpi_check.py

Needs mpi4py (the training environment has it where the inventory turns MPI on). Rank 0 prints one
line, ``mpi-result {json}``: the ranks, the nodes, the sum and the one expected, the latency.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import time

from mpi4py import MPI

WARMUP = 20


def ping_pong(comm: MPI.Comm, peer: int, iterations: int) -> float:
    """Half the median round trip of an 8-byte message between rank 0 and ``peer``, in microseconds
    (the median: a round trip that waited for a CPU does not move it)."""
    message, other = bytearray(8), peer if comm.Get_rank() == 0 else 0
    trips = []
    for index in range(WARMUP + iterations):
        started = time.perf_counter()
        if comm.Get_rank() == 0:
            comm.Send(message, dest=other)
            comm.Recv(message, source=other)
        else:
            comm.Recv(message, source=other)
            comm.Send(message, dest=other)
        if index >= WARMUP:
            trips.append(time.perf_counter() - started)
    return statistics.median(trips) / 2 * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="timed round trips (after 20 warm-up ones)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    nodes = comm.allgather(os.environ.get("SLURMD_NODENAME") or socket.gethostname())
    total = comm.allreduce(rank + 1, op=MPI.SUM)
    peer = next((other for other, node in enumerate(nodes) if node != nodes[0]), None)
    comm.Barrier()
    latency = ping_pong(comm, peer, args.iterations) if peer is not None and rank in (0, peer) else None
    comm.Barrier()
    if rank == 0:
        result = {
            "size": size,
            "slurm_ntasks": int(os.environ.get("SLURM_NTASKS", "0")),
            "sum": total,
            "expected_sum": size * (size + 1) // 2,
            "nodes": {node: nodes.count(node) for node in sorted(set(nodes))},
            "latency_us": latency,
            "latency_peer": peer,
            "iterations": args.iterations,
            "pmix": "PMIX_RANK" in os.environ,
            "library": MPI.Get_library_version().split("\x00")[0].splitlines()[0].strip(),
        }
        print("mpi-result " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
