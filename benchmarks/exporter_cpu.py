"""CPU per scrape of a running exporter (the deployed local cluster's Slurm exporter by default):
scrape it N times over HTTP, one after another, and read the exporter's CPU time (its own, and its
finished children's: sinfo, squeue, sdiag and sacctmgr) from /proc before and after.

    python benchmarks/exporter_cpu.py [--url http://localhost:9446/metrics]
        [--pidfile /run/slurm/cluster-slurm-exporter.pid] [--scrapes 20]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(the process's own user+system CPU, its waited-for children's), in seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    # fields after ")": state is 0, utime 11, stime 12, cutime 13, cstime 14
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://localhost:9446/metrics")
    parser.add_argument("--pidfile", default="/run/slurm/cluster-slurm-exporter.pid")
    parser.add_argument("--scrapes", type=int, default=20)
    args = parser.parse_args()
    with open(args.pidfile, encoding="ascii") as handle:
        pid = int(handle.read().split()[0])
    own_before, children_before = cpu_seconds(pid)
    walls = []
    size = 0
    for _ in range(args.scrapes):
        started = time.monotonic()
        with urllib.request.urlopen(args.url, timeout=60) as answer:
            size = len(answer.read())
        walls.append(time.monotonic() - started)
    own_after, children_after = cpu_seconds(pid)
    per_scrape = {
        "scrapes": args.scrapes,
        "wall_s_median": round(sorted(walls)[len(walls) // 2], 4),
        "wall_s_max": round(max(walls), 4),
        "exporter_cpu_s": round((own_after - own_before) / args.scrapes, 4),
        "slurm_commands_cpu_s": round((children_after - children_before) / args.scrapes, 4),
        "bytes": size,
        "load_average": os.getloadavg(),
    }
    print(json.dumps(per_scrape, indent=2))


if __name__ == "__main__":
    main()
