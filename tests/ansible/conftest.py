"""Role tests run for real with ansible-playbook on localhost (role_runner.py).

Tests that need root (files under /etc, packages) or a GPU skip with the reason; the Slurm build
is slow and runs only with CLUSTER_CLI_SLOW_TESTS=1.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow: takes many minutes (builds Slurm from source); runs only with CLUSTER_CLI_SLOW_TESTS=1",
    )


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections for the test's duration (a daemon's port)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]
