"""A real deploy of inventories/local/inventory.yaml on this machine, shared by the tests here.

Needs root (it installs packages and starts system daemons). Secrets and the build directory
go to a temporary XDG_STATE_HOME so a developer's own cluster state is never touched.
Files run in name order: test_10 deploys and checks, test_50 runs smoke jobs, test_90 tears down.
"""

from __future__ import annotations

import os
import shutil
import socket

import pytest

from deployed import LOCAL_INVENTORY, SECRET_MARKERS, DeployedCluster, run_cli

SLURM_PORTS = (6817, 6819, 17001, 17002, 17003)


def _port_in_use(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "deploying the local cluster needs root (packages, system daemons)"
    if shutil.which("apt-get") is None:
        return "the roles target Debian (apt-get not found)"
    busy = [port for port in SLURM_PORTS if _port_in_use(port)]
    if busy and os.environ.get("CLUSTER_CLI_TEST_REUSE") != "1":
        return f"ports {busy} are already in use (another Slurm is running here); set CLUSTER_CLI_TEST_REUSE=1 to deploy over it"
    return None


def _first_deploy_options() -> list[str]:
    """Each session has new secrets (its own state home). An earlier local cluster whose secrets
    are still marked here (a teardown without --purge, a run stopped half-way) would make the
    secrets preflight refuse the deploy: its secrets are replaced explicitly, as an operator would
    (docs/operations.md, "Rotate the secrets")."""
    return ["--rotate-secrets"] if any(marker.exists() for marker in SECRET_MARKERS) else []


@pytest.fixture(scope="session")
def deployed_cluster(tmp_path_factory: pytest.TempPathFactory) -> DeployedCluster:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    state_home = tmp_path_factory.mktemp("state")
    first = run_cli(state_home, "deploy", str(LOCAL_INVENTORY), *_first_deploy_options())
    if first.returncode != 0:
        pytest.fail(f"deploy failed (exit {first.returncode}):\n{first.stdout[-6000:]}\n{first.stderr[-3000:]}")
    return DeployedCluster(LOCAL_INVENTORY, state_home, first)
