"""A small Ray program: tasks on every node of a Ray cluster, each reporting the node it ran on and
its part of a sum, which the driver checks. The file to replace with your Ray work.

    python ray_tasks.py --address HOST:PORT --nodes N   # what ray.sbatch runs, on its Ray cluster
    python ray_tasks.py                                  # alone: Ray starts on this machine only

Each task is pinned to one Ray node (NodeAffinitySchedulingStrategy), so every node runs some; a
task reports the Slurm node it ran on (SLURMD_NODENAME, which the Ray node's processes inherit
from their srun step), else the host name. The last line says whether the sum is right and every
node took part; the exit code is 0 only then.
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import time

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=1)
def part(start: int, stop: int) -> dict[str, object]:
    """The sum of the squares of start..stop-1, and where and when it ran."""
    began = time.time()
    return {
        "began": began,
        "node": os.environ.get("SLURMD_NODENAME", socket.gethostname()),
        "ray_node": ray.get_runtime_context().get_node_id(),
        "sum": sum(number * number for number in range(start, stop)),
    }


def alive_nodes(count: int, timeout: float) -> list[dict]:
    """The cluster's live Ray nodes, once there are `count` of them (the nodes join one by one)."""
    end = time.monotonic() + timeout
    while True:
        alive = [node for node in ray.nodes() if node["Alive"]]
        if len(alive) >= count:
            return alive
        if time.monotonic() > end:
            raise SystemExit(f"only {len(alive)} of {count} Ray nodes joined within {timeout:.0f} s")
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", help="the Ray head's HOST:PORT (default: a Ray of its own)")
    parser.add_argument("--nodes", type=int, default=1, help="wait for this many Ray nodes")
    parser.add_argument("--tasks-per-node", type=int, default=4)
    parser.add_argument("--numbers", type=int, default=1_000_000, help="sum the squares of 1..NUMBERS")
    parser.add_argument("--timeout", type=float, default=120, help="seconds to wait for the nodes")
    args = parser.parse_args()

    ray.init(address=args.address)
    nodes = alive_nodes(args.nodes, args.timeout)
    print(f"ray {ray.__version__}: {len(nodes)} nodes, {ray.cluster_resources().get('CPU', 0):g} CPUs", flush=True)

    count = args.tasks_per_node * len(nodes)
    bounds = [1 + args.numbers * index // count for index in range(count + 1)]  # count slices of 1..numbers
    pending = [
        part.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nodes[index % len(nodes)]["NodeID"], soft=False))
        .remote(bounds[index], bounds[index + 1])
        for index in range(count)
    ]
    results = ray.get(pending)
    ray.shutdown()

    total = sum(result["sum"] for result in results)
    expected = args.numbers * (args.numbers + 1) * (2 * args.numbers + 1) // 6
    per_node = collections.Counter(result["node"] for result in results)
    ray_nodes = {result["ray_node"] for result in results}
    print(f"first task began at {min(result['began'] for result in results):.3f} (Unix time)")
    for node, tasks in sorted(per_node.items()):
        print(f"{tasks} tasks on {node}")
    ok = total == expected and len(per_node) == len(ray_nodes) == len(nodes)
    print(f"ray result: {'ok' if ok else 'WRONG'}: sum of squares {total} (expected {expected}), "
          f"{len(results)} tasks on {len(per_node)} nodes: {' '.join(sorted(per_node))}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
