"""The renderers and slurm_keys.py agree: what slurm.conf derives from inventory fields is owned
there (or named overridable), and every owned key is rendered from its field."""

from __future__ import annotations

from unit_helpers import SHIPPED_INVENTORIES, load

from cluster_cli.loader import load_cluster
from cluster_cli.render.cgroup_conf import render_cgroup_conf
from cluster_cli.render.priority import signal_item
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
    # the preemption signal is an item of SlurmctldParameters in 22.05, of PreemptParameters later
    later = (SHIPPED_INVENTORIES["gpu-cluster"].read_text(encoding="utf-8")
             .replace("slurm:\n", "slurm:\n  version: 24.11.5-4\n", 1))
    renders = [render_slurm_conf(load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])), render_slurm_conf(load(later))]
    rendered: dict[str, set[str]] = {}
    for text in renders:
        for line in text.splitlines():
            key, _, value = line.partition("=")
            if key in OWNED_SLURM_LIST_ITEMS:
                rendered.setdefault(key, set()).update(value.split(","))
    for key, owned in OWNED_SLURM_LIST_ITEMS.items():
        assert set(owned) <= rendered.get(key, set()), f"{key}={rendered.get(key)} lacks {sorted(owned)}"


def test_the_preemption_signal_item_follows_the_pinned_series() -> None:
    assert signal_item(None) == ("SlurmctldParameters", "preempt_send_user_signal")
    assert signal_item("22.05.8-4+deb12u3") == ("SlurmctldParameters", "preempt_send_user_signal")
    assert signal_item("24.11.5-4") == ("PreemptParameters", "send_user_signal")
