"""The deployed clusters' handle, how to deploy one for the tests here, and how to call the CLI against it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import yaml

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
LOCAL_INVENTORY = REPO / "inventories" / "local" / "inventory.yaml"
# What a deploy leaves on this machine to say that its secrets are the cluster's (the munge and
# slurmdbd roles, read by the secrets preflight); `teardown --purge` removes them.
SECRET_MARKERS = (Path("/var/lib/slurm/munge-key-installed-by-cluster-cli"),
                  Path("/var/lib/slurm/slurmdbd-conf-installed-by-cluster-cli"))
# slurmctld's StateSaveLocation in the inventories the tests deploy.
LEFTOVER_STATE = Path("/var/lib/slurm/slurmctld")


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


# The local inventory's daemons: slurmctld, slurmdbd, the three slurmd, Prometheus, node_exporter, the Slurm exporter.
SLURM_PORTS = (6817, 6819, 17001, 17002, 17003, 9090, 9100, 9446)


def _port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def skip_reason(ports: tuple[int, ...] = SLURM_PORTS) -> str | None:
    """Why a cluster whose daemons listen on ``ports`` cannot be deployed here, if it cannot."""
    if os.geteuid() != 0:
        return "deploying the local cluster needs root (packages, system daemons)"
    if shutil.which("apt-get") is None:
        return "the roles target Debian (apt-get not found)"
    busy = [port for port in ports if _port_in_use(port)]
    if busy and os.environ.get("CLUSTER_CLI_TEST_REUSE") != "1":
        return f"ports {busy} are already in use (another Slurm is running here); set CLUSTER_CLI_TEST_REUSE=1 to deploy over it"
    return None


def leftover_cluster_options(inventory: Path, state_home: Path) -> list[str]:
    """Start from a clean host, as the fixture's name says. An earlier cluster on this machine (a
    teardown without --purge, a run stopped half-way, a machine copied while a cluster ran) leaves
    its state here: slurmctld would recover that cluster's jobs, and one whose processes are gone
    holds its node until its time limit (a CI run found node1 "mixed" right after a fresh deploy).
    Its state is purged as an operator would before a first deploy (`teardown --purge`), unless
    CLUSTER_CLI_TEST_REUSE=1 asks to deploy over a running cluster: then its secrets are replaced
    (docs/operations.md, "Rotate the secrets") and its jobs kept."""
    if not (LEFTOVER_STATE.exists() or any(marker.exists() for marker in SECRET_MARKERS)):
        return []
    if os.environ.get("CLUSTER_CLI_TEST_REUSE") == "1":
        return ["--rotate-secrets"]
    name = yaml.safe_load(inventory.read_text())["cluster_name"]
    done = run_cli(state_home, "teardown", str(inventory), "--purge", "--yes", name, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"purging an earlier cluster's state failed (exit {done.returncode}):\n"
                    f"{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    return []


def deploy_fresh(inventory: Path, ports: tuple[int, ...], state_home: Path) -> DeployedCluster:
    """A first deploy of ``inventory`` from a new state home (new secrets), as a test fixture does:
    skipped where it cannot run here, the test failed with the output when it fails."""
    reason = skip_reason(ports)
    if reason:
        pytest.skip(reason)
    options = leftover_cluster_options(inventory, state_home)
    first = run_cli(state_home, "deploy", str(inventory), *options)
    if first.returncode != 0:
        pytest.fail(f"deploy failed (exit {first.returncode}):\n{first.stdout[-6000:]}\n{first.stderr[-3000:]}")
    return DeployedCluster(inventory, state_home, first)


def run_as(user: str, *argv: str, cwd: Path, timeout: float = 120, stdin: str | None = None) -> str:
    """``argv`` run as ``user`` (runuser) in ``cwd``; its output, or a failed assertion with both streams."""
    done = subprocess.run(["runuser", "-u", user, "--", *argv], cwd=cwd, input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def user_copy(user: str, source: Path, name: str) -> Path:
    """A fresh copy of ``source`` (the installed job templates) that ``user`` made in its home, as ~/NAME."""
    home = Path(subprocess.run(["getent", "passwd", user], capture_output=True, text=True, check=True).stdout.split(":")[5])
    target = home / name
    if target.exists():
        shutil.rmtree(target)
    run_as(user, "cp", "-r", str(source), str(target), cwd=home)
    return target


def wait_for(condition: Callable[[], T], what: str, timeout: float = 600, step: float = 2.0) -> T:
    """``condition()``'s first true answer, asked every ``step`` seconds; a failed assertion after ``timeout``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        found = condition()
        if found:
            return found
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def container_image(deployed_cluster: DeployedCluster) -> dict:
    """The image the inventory's containers.image names, made with training/container_image.py
    (debootstrap from the host's mirror, the training environment inside): built once, then found
    by its content key (a second run takes seconds)."""
    from cluster_cli.loader import load_cluster

    cluster = load_cluster(deployed_cluster.inventory)
    image = cluster.inventory.containers.image
    assert image is not None and image.endswith("/training/rootfs"), image
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed: the container check's image cannot be made")
    done = subprocess.run(
        ["python3", str(REPO / "training" / "container_image.py"), "--out", str(Path(image).parents[1]),
         "--venv", cluster.inventory.training.venv_path, "--mount-point", cluster.inventory.training.work_dir,
         "--prune"],
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("container-image "))
    made = json.loads(line.removeprefix("container-image "))
    print(f"container image: {made}")
    return made
