"""Ray on Slurm, run as a user would: the local cluster deployed again with `training.ray_version`
set (Ray installed into the training environment, ray.sbatch and ray_tasks.py added to the job
templates), then alice copies the installed templates and submits ray.sbatch over two nodes.

On this single-host cluster both Ray nodes share one address, so the test also proves that each
gets its own ports and temporary directory, and that the job stops its Ray nodes and removes their
directories at its end. It measures the time from the job's start (sacct's Start) to the first
Ray task (the time ray_tasks.py prints): docs/benchmarks.md.

Opt-in (Ray's wheel and its dependencies are about 80 MB to download, the deploy a minute more):
CLUSTER_TEST_RAY=1. Afterwards the cluster is deployed again from its own inventory, so the tests
after this file find the templates as they were (Ray stays in the environment: nothing checks it).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from cluster_cli.loader import load_cluster
from cluster_cli.model import Training
from deployed import DeployedCluster, run_as, user_copy, wait_for

RAY_VERSION = "2.60.0"
USER = "alice"

pytestmark = [
    pytest.mark.deploy,
    pytest.mark.training,
    pytest.mark.skipif(os.environ.get("CLUSTER_TEST_RAY") != "1",
                       reason="Ray on the local cluster is opt-in: set CLUSTER_TEST_RAY=1 (downloads Ray, about 80 MB)"),
]


def as_user(*argv: str, cwd: Path, timeout: float = 120) -> str:
    return run_as(USER, *argv, cwd=cwd, timeout=timeout)


def _deploy(cluster: DeployedCluster, inventory: Path) -> None:
    done = cluster.cli("deploy", str(inventory), timeout=1200)
    assert done.returncode == 0, f"deploy {inventory} failed:\n{done.stdout[-5000:]}\n{done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def with_ray(deployed_cluster: DeployedCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Training]:
    """The cluster with Ray; yields its training section (the environment, the templates' directory)."""
    text = deployed_cluster.inventory.read_text()
    assert "\ntraining:\n" in text, "the local inventory no longer has a training section as this test expects"
    edited = tmp_path_factory.mktemp("ray") / "inventory.yaml"
    edited.write_text(text.replace("\ntraining:\n", f'\ntraining:\n  ray_version: "{RAY_VERSION}"\n', 1))
    _deploy(deployed_cluster, edited)
    try:
        yield load_cluster(edited).inventory.training
    finally:
        _deploy(deployed_cluster, deployed_cluster.inventory)


def test_ray_over_two_nodes_runs_tasks_on_both_and_cleans_up(with_ray: Training) -> None:
    found = subprocess.run([f"{with_ray.venv_path}/bin/python", "-c", "import ray; print(ray.__version__)"],
                           capture_output=True, text=True, check=False)
    assert found.stdout.strip() == RAY_VERSION, found.stdout + found.stderr
    installed = Path(with_ray.examples_dir)
    assert (installed / "ray.sbatch").is_file() and (installed / "ray_tasks.py").is_file()

    copy = user_copy(USER, installed, "ray-examples")
    job = as_user("sbatch", "--parsable", "ray.sbatch", cwd=copy).strip()

    def ended() -> str:
        state = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "State", "-j", job], capture_output=True,
                               text=True, check=True).stdout.strip()
        return state if state not in ("", "PENDING", "RUNNING", "REQUEUED", "COMPLETING") else ""

    state = wait_for(ended, f"job {job} to end", timeout=300)
    log = (copy / f"ray-{job}.out").read_text()
    assert state == "COMPLETED", f"job {job}: {state}\n{log[-5000:]}"

    result = re.search(r"^ray result: ok: sum of squares (\d+) \(expected (\d+)\), (\d+) tasks on 2 nodes: (\S+) (\S+)$",
                       log, re.MULTILINE)
    assert result, log[-5000:]
    assert result.group(1) == result.group(2) and result.group(4) != result.group(5), result.group(0)
    assert {result.group(4), result.group(5)} <= {"node1", "node2", "node3"}, result.group(0)
    assert len(re.findall(r"^\d+ tasks on node\d$", log, re.MULTILINE)) == 2, log[-3000:]
    assert "Token authentication is disabled" not in log, log[-3000:]  # the job's token guards its Ray cluster

    # Clean shutdown: no Ray process of the job's user left, no temporary directory of the job's nodes.
    left = subprocess.run(["pgrep", "-u", USER, "-f", "raylet|gcs_server|ray::"], capture_output=True, text=True,
                          check=False).stdout
    assert left == "", f"Ray processes left after job {job}: {left}"
    assert not list(Path("/tmp").glob(f"ray-{job}-*")), sorted(Path("/tmp").glob(f"ray-{job}-*"))

    started = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "Start,End", "-j", job], capture_output=True,
                             text=True, check=True).stdout.strip().split("|")
    first = float(re.search(r"^first task began at (\S+) \(Unix time\)$", log, re.MULTILINE).group(1))
    start, finish = (datetime.fromisoformat(stamp).timestamp() for stamp in started)  # sacct: local time, 1 s steps
    print(f"\nray job {job}: job start to first task {first - start:.1f} s (sacct Start to the first task's "
          f"start, sacct's whole seconds); whole job {finish - start:.0f} s")
    assert -1 <= first - start < 120, (started, first)
