"""A heterogeneous cluster on this machine (inventories/examples/hetero-local.yaml: two GPU types,
two GPUs and one per node, CPU-only nodes, three overlapping partitions, a tree topology),
deployed after the local cluster's teardown (test_90) and purged at the end."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deployed import REPO, DeployedCluster, deploy_options_for_leftover_secrets, run_cli, skip_reason

pytestmark = pytest.mark.deploy

HETERO_INVENTORY = REPO / "inventories" / "examples" / "hetero-local.yaml"
HETERO_PORTS = (6817, 6819, 17011, 17012, 17021, 17031, 17032)


@pytest.fixture(scope="module")
def hetero(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeployedCluster]:
    reason = skip_reason(HETERO_PORTS)
    if reason:
        pytest.skip(reason)
    state_home = tmp_path_factory.mktemp("hetero-state")
    first = run_cli(state_home, "deploy", str(HETERO_INVENTORY), *deploy_options_for_leftover_secrets())
    if first.returncode != 0:
        pytest.fail(f"deploy failed (exit {first.returncode}):\n{first.stdout[-6000:]}\n{first.stderr[-3000:]}")
    cluster = DeployedCluster(HETERO_INVENTORY, state_home, first)
    yield cluster
    done = cluster.cli("teardown", str(HETERO_INVENTORY), "--purge", "--yes", "hetero",
                       "--backup-dir", str(tmp_path_factory.mktemp("hetero-backup")), timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def _pid(node: str) -> int:
    return int(Path(f"/run/slurm/slurmd-{node}.pid").read_text().split()[0])


def test_status_names_a_killed_slurmd_within_seconds_and_a_deploy_brings_it_back(hetero: DeployedCluster) -> None:
    inventory = str(hetero.inventory)
    assert hetero.cli("status", inventory).returncode == 0
    subprocess.run(["kill", "-KILL", str(_pid("cpu2"))], check=True)
    started = time.monotonic()
    down = hetero.cli("status", inventory, timeout=60)
    seconds = time.monotonic() - started
    assert down.returncode == 1, down.stdout[-3000:]
    assert "slurmd@cpu2 on localhost: not running" in down.stdout, down.stdout[-3000:]
    assert seconds < 10, f"status took {seconds:.1f} s"
    assert hetero.cli("deploy", inventory).returncode == 0
    back = hetero.cli("status", inventory)
    assert back.returncode == 0 and "daemons: all 8 running and listening" in back.stdout, back.stdout[-3000:]
