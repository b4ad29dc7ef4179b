"""A real deploy of inventories/local/inventory.yaml on this machine, shared by the tests here.

Needs root (it installs packages and starts system daemons). Secrets and the build directory
go to a temporary XDG_STATE_HOME so a developer's own cluster state is never touched.
Files run in name order: test_10 deploys and checks, test_50 runs smoke jobs, test_90 tears down;
test_95 then deploys the heterogeneous example cluster, checks it, and purges it.
"""

from __future__ import annotations

import pytest

from deployed import LOCAL_INVENTORY, SLURM_PORTS, DeployedCluster, deploy_fresh


@pytest.fixture(scope="session")
def deployed_cluster(tmp_path_factory: pytest.TempPathFactory) -> DeployedCluster:
    return deploy_fresh(LOCAL_INVENTORY, SLURM_PORTS, tmp_path_factory.mktemp("state"))
