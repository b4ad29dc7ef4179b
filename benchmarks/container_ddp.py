"""DDP step time inside the container against outside it (issue 35's figure), in rounds on the
deployed local cluster.

    .venv/bin/python benchmarks/container_ddp.py [-n 10]

Each round is one `cluster-cli smoke INVENTORY --only ddp,container --json F` (training_soak's
round): the `ddp` check's 2-rank mean step time outside, then the `container` check's inside the
image, both 2 ranks on 2 nodes, gloo on CPU. One round's two runs follow each other within seconds,
so the machine's load, which moves the step time by more than 5 % from minute to minute, is about
the same for both: the figure is the median over the rounds of each round's ratio inside/outside,
with the smallest and largest ratio beside it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent)]
from deploy_local import INVENTORY, machine
from training_soak import one_round


def step_times(checks: list[dict]) -> tuple[float, float]:
    """The `ddp` and `container` checks' 2-rank mean step times (ms) of one round."""
    by_name = {check["name"]: check for check in checks}
    for name in ("ddp", "container"):
        if by_name.get(name, {}).get("verdict") != "pass":
            raise SystemExit(f"{name}: {by_name.get(name, {}).get('reason', 'did not run')}")
    return float(by_name["ddp"]["details"]["step_time_ms"]), float(by_name["container"]["details"]["step_time_ms"])


def summary(rounds: list[tuple[float, float]]) -> str:
    ratios = sorted(inside / outside for outside, inside in rounds)
    outside = statistics.median(pair[0] for pair in rounds)
    inside = statistics.median(pair[1] for pair in rounds)
    return (f"{len(rounds)} rounds: median step time {inside:.2f} ms inside vs {outside:.2f} ms outside; "
            f"median ratio inside/outside {statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--rounds", type=int, default=10)
    parser.add_argument("--inventory", default=str(INVENTORY))
    options = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="container-ddp-") as work:
        for index in range(options.rounds):
            checks, wall, _ = one_round(options.inventory, "ddp,container", Path(work) / f"{index}.json")
            rounds.append(step_times(checks))
            print(f"round {index + 1}: outside {rounds[-1][0]:.2f} ms, inside {rounds[-1][1]:.2f} ms ({wall:.0f} s)", flush=True)
    print(summary(rounds))
    print(f"Machine: {machine()}")


if __name__ == "__main__":
    main()
