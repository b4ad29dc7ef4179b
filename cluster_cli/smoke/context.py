"""What every check receives: the target, a Slurm session as the test user, and its own directory."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.suite_errors import NodesUnusable
from cluster_cli.smoke.slurm import JobInfo, SlurmSession
from cluster_cli.smoke.text import read_excerpt, read_job_text
from cluster_cli.smoke.target import SmokeTarget
from cluster_cli.smoke.thresholds import Thresholds
from cluster_cli.smoke.userdir import UserDir


@dataclass
class CheckContext:
    target: SmokeTarget
    session: SlurmSession
    run_id: str
    run_home: UserDir
    training_dir: Path
    config: dict[str, str]
    torch_problem: str | None = None
    unusable_nodes: dict[str, str] = field(default_factory=dict)
    deadline: float = field(default=math.inf)
    every_node: list[str] = field(default_factory=list)
    """All nodes of the scope before sampling (``target.nodes`` is the sample)."""
    every_unusable: dict[str, str] = field(default_factory=dict)
    """Of ``every_node``, those that cannot take jobs, with their state."""
    exclude: list[str] = field(default_factory=list)
    """Nodes of the partition every job of this scope avoids: other groups', unsampled ones."""
    prefix: str = ""
    """Starts this scope's directory and job names (``gpu.h100-``); "" for a plain target."""

    def thresholds(self, detected_gpu: str | None = None) -> Thresholds:
        return self.target.resolved_thresholds(detected_gpu)

    def remaining(self) -> float:
        return max(1.0, self.deadline - time.monotonic())

    def job_name(self, check: str) -> str:
        return f"smoke-{self.run_id}-{self.prefix}{check}"

    @property
    def run_dir(self) -> Path:
        return self.run_home.path

    def check_dir(self, check: str) -> Path:
        """The check's own directory in the run directory, the test user's."""
        with self.run_home.child(self.prefix + check) as work:
            return work.path

    def write_script(self, check: str, name: str, text: str) -> Path:
        """An executable script (root's, 0755) in the check's directory, written without
        following anything the test user may have put there (see ``userdir``)."""
        with self.run_home.child(self.prefix + check) as work:
            return work.write_file(name, text.encode(), 0o755)

    def job_args(self, check: str, pinned: bool = True) -> list[str]:
        """Options every job of a check carries: name, time limit, partition and target extras;
        ``pinned``: and the exclusion of the partition's nodes outside this scope's sample."""
        minutes = max(1, math.ceil(self.target.check_timeout_s / 60) + 1)
        args = [*self.session.job_args, f"--job-name={self.job_name(check)}", f"--time={minutes}"]
        if pinned and self.exclude:
            args.append(f"--exclude={','.join(self.exclude)}")
        return args

    def all_nodes_args(self) -> list[str]:
        """Options for a job over every target node; NodesUnusable when some cannot take jobs,
        so the check fails at once with the nodes named instead of pending until its timeout."""
        if self.unusable_nodes:
            listed = ", ".join(f"{node} {state}" for node, state in sorted(self.unusable_nodes.items()))
            raise NodesUnusable(f"this check needs every node; not usable: {listed}")
        nodes = self.target.nodes
        return [f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}"]


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(read_job_text(path))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def job_failure(name: str, info: JobInfo, output: Path, what: str) -> CheckResult:
    """A failed check that names the job, its state and exit code, with the tail of its output."""
    state = f"{info.state} (exit {info.exit_code})" if info.records else "gone from the controller"
    reason = f"job {info.job_id} ended {state}: {what}"
    if info.get("Reason") not in ("", "None"):
        reason += f"; Slurm reason: {info.get('Reason')}"
    return CheckResult(name, Verdict.FAIL, reason, job_ids=[info.job_id], output_tail=read_excerpt(output))
