"""Where cluster-cli finds what it runs, and where it keeps per-cluster state on the control node."""

from __future__ import annotations

import os
from pathlib import Path

from cluster_cli.errors import ClusterCliError


def cluster_state_dir(cluster_name: str) -> Path:
    """``$XDG_STATE_HOME/cluster-cli/CLUSTER`` (default ``~/.local/state/cluster-cli/CLUSTER``)."""
    state_home = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state_home / "cluster-cli" / cluster_name


def default_build_dir(cluster_name: str) -> Path:
    return cluster_state_dir(cluster_name) / "build"


def default_secrets_dir(cluster_name: str) -> Path:
    return cluster_state_dir(cluster_name) / "secrets"


# on the database host (and the primary controller): where `upgrade` and `teardown --purge` put their backups
DEFAULT_BACKUP_DIR = "/var/backups/cluster-cli"

PROJECT_DIR_VARIABLE = "CLUSTER_CLI_PROJECT_DIR"


def project_root() -> Path | None:
    """The directory with ansible.cfg, playbooks/, roles/ and training/: ``$CLUSTER_CLI_PROJECT_DIR``,
    else the source checkout this package runs from, else the copy an installed wheel carries
    (``cluster_cli/share``, see setup.py). None when none of them has playbooks/site.yml."""
    package = Path(__file__).resolve().parent
    configured = os.environ.get(PROJECT_DIR_VARIABLE)
    candidates = [Path(configured)] if configured else [package.parent, package / "share"]
    for candidate in candidates:
        if (candidate / "playbooks" / "site.yml").is_file() and (candidate / "roles").is_dir():
            return candidate
    return None


def project_dir() -> Path:
    """project_root(), or the error that says where it was looked for and how to point at it."""
    root = project_root()
    if root is None:
        raise ClusterCliError(
            f"cannot find playbooks/site.yml and roles/ (looked in ${PROJECT_DIR_VARIABLE}, the source "
            "checkout and the installed package): reinstall cluster-cli or set that variable"
        )
    return root
