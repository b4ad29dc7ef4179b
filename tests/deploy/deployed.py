"""The deployed local cluster handle and how to call the CLI against it."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCAL_INVENTORY = REPO / "inventories" / "local" / "inventory.yaml"
# What a deploy leaves on this machine to say that its secrets are the cluster's (the munge and
# slurmdbd roles, read by the secrets preflight); `teardown --purge` removes them.
SECRET_MARKERS = (Path("/var/lib/slurm/munge-key-installed-by-cluster-cli"),
                  Path("/var/lib/slurm/slurmdbd-conf-installed-by-cluster-cli"))


@dataclass
class DeployedCluster:
    inventory: Path
    state_home: Path
    first_run: subprocess.CompletedProcess[str]

    def cli(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return run_cli(self.state_home, *args, timeout=timeout)


def run_cli(state_home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, XDG_STATE_HOME=str(state_home), COLUMNS="160")
    return subprocess.run(
        [sys.executable, "-m", "cluster_cli", *args],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
