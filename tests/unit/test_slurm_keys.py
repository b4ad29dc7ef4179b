"""The renderers and slurm_keys.py agree: what slurm.conf derives from inventory fields is owned
there (or named overridable), and every owned key is rendered from its field."""

from __future__ import annotations

from unit_helpers import SHIPPED_INVENTORIES

from cluster_cli.loader import load_cluster
from cluster_cli.render.cgroup_conf import render_cgroup_conf
from cluster_cli.render.slurm_conf import derived_list_items, derived_settings, render_slurm_conf
from cluster_cli.slurm_keys import (
    MANAGED_CGROUP_KEYS,
    MANAGED_SLURM_KEYS,
    OVERRIDABLE_DERIVED_SLURM_KEYS,
    OWNED_SLURM_LIST_ITEMS,
)

# Slurm's old spellings of SlurmctldHost: owned so that they cannot contradict it, never rendered.
LEGACY = {"ControlMachine", "BackupController"}


def test_every_key_slurm_conf_derives_is_owned_or_named_overridable() -> None:
    for name in SHIPPED_INVENTORIES:
        derived = set(derived_settings(load_cluster(SHIPPED_INVENTORIES[name])))
        stray = derived - set(MANAGED_SLURM_KEYS) - OVERRIDABLE_DERIVED_SLURM_KEYS
        assert not stray, f"{name}: slurm.conf derives {sorted(stray)}, which slurm_keys.py does not list"


def test_every_owned_key_is_rendered() -> None:
    # gpu-cluster.yaml has everything: a backup controller, accounting, a topology.
    cluster = load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])
    keys = {line.split("=", 1)[0] for line in render_slurm_conf(cluster).splitlines() if "=" in line}
    missing = set(MANAGED_SLURM_KEYS) - LEGACY - keys
    assert not missing, f"owned by the inventory but not rendered: {sorted(missing)}"
    cgroup_keys = {line.split("=", 1)[0] for line in render_cgroup_conf(cluster).splitlines() if "=" in line}
    assert set(MANAGED_CGROUP_KEYS) <= cgroup_keys


def test_every_list_item_slurm_conf_derives_is_owned() -> None:
    configless = load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])
    assert configless.inventory.slurm.configless, "gpu-cluster.yaml is the shipped configless example"
    for key, items in derived_list_items(configless).items():
        owned = OWNED_SLURM_LIST_ITEMS.get(key, {})
        assert key not in MANAGED_SLURM_KEYS, f"{key} is owned whole and as a list"
        assert set(items) <= set(owned), f"{key}: slurm.conf derives {items}, slurm_keys.py owns {sorted(owned)}"


def test_every_owned_list_item_is_rendered() -> None:
    lines = render_slurm_conf(load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])).splitlines()
    for key, owned in OWNED_SLURM_LIST_ITEMS.items():
        values = [line.split("=", 1)[1] for line in lines if line.split("=", 1)[0] == key]
        assert len(values) == 1, f"{key}: {values}"
        assert set(owned) <= set(values[0].split(",")), f"{key}={values[0]} lacks {sorted(owned)}"
