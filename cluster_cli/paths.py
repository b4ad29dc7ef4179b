"""Where cluster-cli keeps per-cluster state on the control node."""

from __future__ import annotations

import os
from pathlib import Path


def cluster_state_dir(cluster_name: str) -> Path:
    """``$XDG_STATE_HOME/cluster-cli/CLUSTER`` (default ``~/.local/state/cluster-cli/CLUSTER``)."""
    state_home = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state_home / "cluster-cli" / cluster_name


def default_build_dir(cluster_name: str) -> Path:
    return cluster_state_dir(cluster_name) / "build"


def default_secrets_dir(cluster_name: str) -> Path:
    return cluster_state_dir(cluster_name) / "secrets"
