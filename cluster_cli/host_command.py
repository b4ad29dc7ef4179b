"""Run a command on a cluster host and get its exit code and output: directly when the host is this
machine, else through Ansible (an inventory of the cluster written once into a work directory).
`status` asks the controller with it, `health` runs the node health check on each compute host."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cluster_cli.ansible.runner import run_ad_hoc
from cluster_cli.cluster import Cluster
from cluster_cli.render.ansible_inventory import render_ansible_inventory


class HostCommand:
    """Runs a command on a cluster host: directly when it is this machine, else through Ansible."""

    def __init__(self, cluster: Cluster, workdir: Path):
        self.cluster = cluster
        self.inventory_file = workdir / "inventory.yml"
        self.inventory_file.write_text(render_ansible_inventory(cluster), encoding="utf-8")

    def run(self, host: str, argv: list[str], timeout_s: float = 30) -> tuple[int, str]:
        managed = self.cluster.hosts[host]
        if managed.connection == "local":
            try:
                completed = subprocess.run(
                    argv, capture_output=True, text=True, timeout=timeout_s, check=False
                )
            except FileNotFoundError:
                return 127, f"{argv[0]}: not installed"
            except subprocess.TimeoutExpired:
                return 124, f"timed out after {timeout_s:.0f} s"
            return completed.returncode, (completed.stdout + completed.stderr).strip()
        return run_ad_hoc(self.inventory_file, host, argv, timeout_s)
