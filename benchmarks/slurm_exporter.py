"""The Slurm exporter's scrape of a 10,000-node, 100,000-job cluster, from outputs made in the
formats Debian's Slurm 22.05 prints (tests/unit/data/slurm_metrics/22.05): parse time, CPU time and
peak memory of one scrape (the Slurm commands themselves are not run).

    python benchmarks/slurm_exporter.py [--nodes 10000] [--jobs 100000]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cluster_cli.exporters import slurm_metrics

PARTITIONS = ("train", "inference", "cpu")
STATES = ("idle", "mixed", "allocated", "drained", "draining", "down*", "idle*")
JOB_STATES = ("RUNNING", "PENDING", "PENDING", "COMPLETING")
REASONS = ("Resources", "Priority", "QOSMaxGRESPerUser", "JobHeldUser", "Dependency")


def sinfo_text(nodes: int) -> str:
    lines = []
    for n in range(nodes):
        partition = PARTITIONS[n % len(PARTITIONS)]
        state = STATES[n % len(STATES)]
        gres, used = ("(null)", "gpu:0") if partition == "cpu" else ("gpu:h100:8(S:0-1)", f"gpu:h100:{n % 9}(IDX:0-7)")
        reason = f"cluster-cli health: gpu {n % 8} ecc" if "drain" in state else "none"
        lines.append(f"gpu{n:05d}|{partition}{'*' if partition == 'train' else ''}|{state}|{n % 192}/{192 - n % 192}/0/192|"
                     f"2000000|{(n % 100) * 1000}|{gres}|{used}|{'root' if 'drain' in state else ''}|{reason}")
    return "\n".join(lines) + "\n"


def squeue_text(jobs: int) -> str:
    def nodes(j: int) -> str:
        return "" if JOB_STATES[j % 4] == "PENDING" else f"gpu[{j % 9990:05d}-{j % 9990 + 4:05d}]"

    return "".join(
        f"{PARTITIONS[j % 3]}|team{j % 50}|{JOB_STATES[j % 4]}|{REASONS[j % 5] if JOB_STATES[j % 4] == 'PENDING' else 'None'}|"
        f"2026-11-27T{j % 24:02d}:{j % 60:02d}:00|{nodes(j)}\n"
        for j in range(jobs)
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=100_000)
    args = parser.parse_args(argv)
    outputs = {"sinfo": sinfo_text(args.nodes), "squeue": squeue_text(args.jobs),
               "sdiag": (Path(__file__).resolve().parents[1] / "tests/unit/data/slurm_metrics/22.05/sdiag.txt").read_text()}
    exporter = slurm_metrics.Exporter(run=lambda argv: slurm_metrics.Answer(True, outputs[argv[0]]))
    cpu, wall = time.process_time(), time.perf_counter()
    text = slurm_metrics.exposition(exporter.scrape())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    tracemalloc.start()  # a second scrape for the memory figure: tracing slows the first's timing
    slurm_metrics.exposition(exporter.scrape())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({
        "nodes": args.nodes, "jobs": args.jobs, "input_bytes": sum(len(t) for t in outputs.values()),
        "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "peak_python_bytes": peak,
        "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "output_lines": text.count("\n"),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
