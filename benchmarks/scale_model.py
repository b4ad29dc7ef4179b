"""The cost model of benchmarks/deploy_scale.py: cost = fixed + per_host x hosts, and its projection.

A deploy's control-node CPU is fitted by least squares over the compute-host counts measured; the
wall time of a large cluster is projected from three bounds, whichever is the longest:

- the main ansible-playbook process, single-threaded: it templates, queues and collects every host's
  every task, so its CPU (fitted like the whole tree's) passes in series;
- the whole tree's CPU spread over the cores the workers can use (min(cores, forks));
- the host chain: one compute host's tasks one after another, ``ceil(hosts / forks)`` times over,
  because the linear strategy runs each task on ``forks`` hosts at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Fit:
    """cost(hosts) = fixed + per_host x hosts (seconds), over ``points`` measured host counts."""

    fixed: float
    per_host: float
    points: int

    def at(self, hosts: int) -> float:
        return self.fixed + self.per_host * hosts


def fit_line(hosts: Sequence[int], costs: Sequence[float]) -> Fit:
    """Least-squares line through (hosts, cost); needs two or more distinct host counts."""
    if len(hosts) != len(costs):
        raise ValueError("hosts and costs differ in length")
    if len(set(hosts)) < 2:
        raise ValueError("a line needs two or more distinct host counts")
    count = len(hosts)
    mean_x = sum(hosts) / count
    mean_y = sum(costs) / count
    sxx = sum((x - mean_x) ** 2 for x in hosts)
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(hosts, costs))
    slope = sxy / sxx
    return Fit(fixed=mean_y - slope * mean_x, per_host=slope, points=count)


@dataclass(frozen=True)
class Projection:
    hosts: int
    cpu_s: float  # the whole ansible-playbook tree (and cluster-cli) on the control node
    main_s: float  # bound: the main process's CPU, in series
    spread_s: float  # bound: the tree's CPU over min(cores, forks) cores
    chain_s: float  # bound: one host's task chain, ceil(hosts / forks) rounds

    @property
    def wall_s(self) -> float:
        return max(self.main_s, self.spread_s, self.chain_s)

    @property
    def bound(self) -> str:
        """Which bound decides the wall time."""
        named = {"main process": self.main_s, "CPU over the cores": self.spread_s, "host chain": self.chain_s}
        return max(named, key=lambda name: named[name])


def project(hosts: int, cpu: Fit, main: Fit, chain_s: float, forks: int, cores: int) -> Projection:
    """The deploy of ``hosts`` compute hosts from a control node of ``cores`` cores at ``forks``."""
    if forks < 1 or cores < 1:
        raise ValueError("forks and cores must be positive")
    total = max(cpu.at(hosts), 0.0)
    return Projection(
        hosts=hosts,
        cpu_s=total,
        main_s=max(main.at(hosts), 0.0),
        spread_s=total / min(cores, forks),
        chain_s=chain_s * math.ceil(hosts / forks),
    )
