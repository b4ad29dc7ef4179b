"""A real deploy of inventories/local/inventory.yaml on this machine, shared by the tests here.

Needs root (it installs packages and starts system daemons). Secrets and the build directory
go to a temporary XDG_STATE_HOME so a developer's own cluster state is never touched.
Files run in name order: test_10 deploys and checks, test_50 runs smoke jobs, test_90 tears down;
test_95 then deploys the heterogeneous example cluster, checks it, and purges it.
"""

from __future__ import annotations

import pytest

from deployed import LOCAL_INVENTORY, DeployedCluster, deploy_options_for_leftover_secrets, run_cli, skip_reason


@pytest.fixture(scope="session")
def deployed_cluster(tmp_path_factory: pytest.TempPathFactory) -> DeployedCluster:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    state_home = tmp_path_factory.mktemp("state")
    first = run_cli(state_home, "deploy", str(LOCAL_INVENTORY), *deploy_options_for_leftover_secrets())
    if first.returncode != 0:
        pytest.fail(f"deploy failed (exit {first.returncode}):\n{first.stdout[-6000:]}\n{first.stderr[-3000:]}")
    return DeployedCluster(LOCAL_INVENTORY, state_home, first)
