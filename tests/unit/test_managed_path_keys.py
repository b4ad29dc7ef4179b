"""Directories the roles create come from slurm.paths; overriding them in slurm.conf is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_cli.errors import InventoryError
from cluster_cli.loader import load_cluster_text
from cluster_cli.render.slurm_conf import render_slurm_conf

LOCAL = (Path(__file__).resolve().parents[2] / "inventories" / "local" / "inventory.yaml").read_text()


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("StateSaveLocation", "slurm.paths.state_dir"),
        ("SlurmdSpoolDir", "slurm.paths.spool_dir"),
        ("SlurmctldLogFile", "slurm.paths.log_dir"),
        ("SlurmdPidFile", "slurm.paths.run_dir"),
    ],
)
def test_path_keys_are_managed(key: str, field: str) -> None:
    text = LOCAL.replace("    SlurmdDebug: info\n", f"    SlurmdDebug: info\n    {key}: /elsewhere\n")
    with pytest.raises(InventoryError) as caught:
        load_cluster_text(text, "inv.yaml")
    line = text.splitlines().index(f"    {key}: /elsewhere") + 1
    assert str(caught.value) == f"inv.yaml:{line}: slurm.conf.{key}: set by the inventory: use {field}"


def test_state_dir_reaches_slurm_conf_and_the_roles() -> None:
    text = LOCAL.replace("slurm:\n  conf:\n", "slurm:\n  paths:\n    state_dir: /shared/state\n  conf:\n")
    cluster = load_cluster_text(text, "inv.yaml")
    assert "StateSaveLocation=/shared/state\n" in render_slurm_conf(cluster)
