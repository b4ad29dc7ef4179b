"""deploy / teardown: validate, render into the build directory, run the playbook, report."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cluster_cli.ansible.runner import (
    PlaybookOptions,
    PlaybookResult,
    TaskFailure,
    project_dir,
    run_ad_hoc,
    run_playbook,
)
from cluster_cli.build import Bundle, build_bundle, secrets_dir_for
from cluster_cli.cluster import Cluster
from cluster_cli.paths import cluster_state_dir, default_build_dir

LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class Prepared:
    cluster: Cluster
    bundle: Bundle

    @property
    def inventory_file(self) -> Path:
        return self.bundle.directory / "ansible" / "inventory.yml"

    @property
    def var_files(self) -> list[Path]:
        ansible_dir = self.bundle.directory / "ansible"
        return [ansible_dir / "cluster_vars.yml", ansible_dir / "secret_vars.yml"]


def prepare(cluster: Cluster, inventory_path: Path, build_dir: Path | None = None) -> Prepared:
    """Generate missing secrets and render every file; touches no host."""
    directory = build_dir or default_build_dir(cluster.name)
    return Prepared(cluster, build_bundle(cluster, directory, secrets_dir_for(cluster, inventory_path)))


def write_extra_vars(prepared: Prepared, variables: dict[str, Any]) -> list[Path]:
    path = prepared.bundle.directory / "ansible" / "run_vars.yml"
    path.write_text(yaml.safe_dump(variables, sort_keys=True), encoding="utf-8")
    return [path]


def new_log_path(cluster: Cluster, verb: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return cluster_state_dir(cluster.name) / "logs" / f"{verb}-{stamp}.log"


def run(
    prepared: Prepared,
    playbook: str,
    options: PlaybookOptions,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    extra_var_files: list[Path] | None = None,
) -> PlaybookResult:
    return run_playbook(
        project_dir() / "playbooks" / playbook,
        prepared.inventory_file,
        prepared.var_files + (extra_var_files or []),
        new_log_path(prepared.cluster, Path(playbook).stem),
        options,
        on_event,
    )


def daemon_logs(cluster: Cluster, host: str, role: str | None) -> list[str]:
    """The log files worth showing when a task of ``role`` failed on ``host``."""
    log_dir = cluster.inventory.slurm.paths.log_dir
    managed = cluster.hosts.get(host)
    if role == "slurmctld":
        return [f"{log_dir}/slurmctld.log"]
    if role == "slurmdbd":
        return [f"{log_dir}/slurmdbd.log"]
    if role == "slurmd" and managed is not None:
        return [f"{log_dir}/slurmd-{node.name}.log" for node in managed.slurmd_nodes]
    if role == "munge":
        return ["/var/log/munge/munged.log"]
    return []


def failure_log_tails(prepared: Prepared, failure: TaskFailure) -> list[tuple[str, str]]:
    """Last lines of the failing daemon's logs, fetched from the host through Ansible."""
    if failure.unreachable:
        return []
    tails = []
    for path in daemon_logs(prepared.cluster, failure.host, failure.role):
        code, output = run_ad_hoc(
            prepared.inventory_file, failure.host, ["tail", "-n", str(LOG_TAIL_LINES), path], timeout_s=60
        )
        tails.append((path, output if code == 0 else f"(could not read: {output[:200]})"))
    return tails
