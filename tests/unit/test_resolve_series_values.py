"""resolve/series_values.py: plugins the target Slurm series ships, and values in Slurm's own formats."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_resolve_topology import BLOCK
from unit_helpers import BASE, FILE, REPO, SHIPPED_INVENTORIES, edit, problem, problems

from cluster_cli.errors import InventoryError
from cluster_cli.loader import load_cluster
from cluster_cli.deployed import DeployedRecord
from cluster_cli.ownership import ExpectedSecrets
from cluster_cli.plan import plan_cluster
from cluster_cli.probe import HostProbe

from cluster_cli.render.cgroup_conf import cgroup_settings
from cluster_cli.render.slurm_conf import global_settings
from cluster_cli.resolve.series_values import series_problems
from cluster_cli.slurm_facts import plugin_problems, supported_series
from cluster_cli.slurm_facts.facts import series_data
from cluster_cli.slurm_facts.plugins import PLUGIN_KEYS

BLOCK_IN_2205 = (
    "TopologyPlugin=topology/block: Slurm 22.05 has no topology/block plugin (no topology_block.so in its Debian"
    " packages): topology/3d_torus, topology/hypercube, topology/none, topology/tree"
)


def pinned(text: str, version: str, conf: str = "") -> str:
    return text + f"slurm:\n  version: {version}\n{conf}"


def test_topology_block_is_refused_where_the_pinned_series_has_no_such_plugin():
    text = pinned(BASE + BLOCK, "22.05.8-4+deb12u3")
    assert problems(text) == [problem(text, "plugin: block", "topology.plugin", BLOCK_IN_2205)]


@pytest.mark.parametrize("version", ["24.11.5-4+deb13u1", "26.05.5-1"])
def test_topology_block_is_accepted_where_the_series_ships_it(version):
    assert problems(pinned(BASE + BLOCK, version)) == []


def test_without_a_pinned_version_validate_leaves_the_plugins_to_plan():
    assert problems(BASE + BLOCK) == []


def test_a_version_without_facts_is_not_checked():
    assert problems(pinned(BASE + BLOCK, "23.02.7")) == []


def test_slurm_conf_and_cgroup_overrides_name_plugins_the_series_ships():
    text = pinned(
        BASE,
        "24.11.5-4+deb13u1",
        "  conf:\n    SelectType: select/cons_res\n    TaskPlugin: affinity,task/cgroup,task/bogus\n"
        "    JobAcctGatherType: cgroup\n    JobCompType: jobcomp/none\n"
        "    SchedulerType: select/linear\n"
        "cgroup:\n  overrides:\n    CgroupPlugin: cgroup/v1\n",
    )
    assert problems(text) == [
        problem(text, "SelectType:", "slurm.conf.SelectType",
                "Slurm 24.11 has no select/cons_res plugin (no select_cons_res.so in its Debian packages):"
                " select/cons_tres, select/linear"),
        problem(text, "TaskPlugin:", "slurm.conf.TaskPlugin",
                "Slurm 24.11 has no task/bogus plugin (no task_bogus.so in its Debian packages):"
                " task/affinity, task/cgroup"),
        problem(text, "JobAcctGatherType:", "slurm.conf.JobAcctGatherType",
                "'cgroup' is not a plugin: write jobacct_gather/NAME"),
        problem(text, "SchedulerType:", "slurm.conf.SchedulerType",
                "'select/linear' is a select plugin: this key takes sched/NAME"),
        # a key the inventory owns is refused as an override, not once more for its plugin
        problem(text, "CgroupPlugin", "cgroup.overrides.CgroupPlugin", "set by the inventory: use cgroup.version"),
    ]


def test_plugin_keys_are_found_without_case():
    assert plugin_problems("22.05", "slurm.conf", "topologyplugin", "topology/block") != []
    assert plugin_problems("22.05", "slurm.conf", "KillWait", "topology/block") == []
    assert plugin_problems("22.05", "slurm.conf", "SelectType", None) == []


@pytest.mark.parametrize("name", supported_series())
@pytest.mark.parametrize("inventory", sorted(SHIPPED_INVENTORIES))
def test_every_plugin_cluster_cli_renders_is_one_each_series_ships(name, inventory):
    """The data must know what the renderers write: a plugin missing from it would refuse them all
    (rendered as for a cluster pinned to the series: some defaults follow it, as MpiDefault does)."""
    cluster = load_cluster(SHIPPED_INVENTORIES[inventory])
    slurm = cluster.inventory.slurm.model_copy(update={"version": series_data(name)["packages"]["slurm-client"]})
    cluster = dataclasses.replace(cluster, inventory=cluster.inventory.model_copy(update={"slurm": slurm}))
    rendered = {"slurm.conf": global_settings(cluster), "cgroup.conf": cgroup_settings(cluster)}
    found = [
        (file_name, key, value, plugin_problems(name, file_name, key, value))
        for file_name, settings in rendered.items()
        for key, value in settings.items()
        if key in PLUGIN_KEYS[file_name]
    ]
    assert found, "no plugin key rendered: the check would see nothing"
    assert [one for one in found if one[3]] == []


def test_the_plugin_data_knows_the_renderers_plugin_types():
    for name in supported_series():
        assert plugin_problems(name, "slurm.conf", "SelectType", "select/cons_tres") == []
        assert plugin_problems(name, "slurm.conf", "SelectType", "select/nothing") != []


# ---- plan: the version its probe found -----------------------------------------------------------


def test_series_problems_point_at_the_field_in_the_inventory_file(tmp_path: Path):
    text = BASE + BLOCK
    path = tmp_path / FILE
    path.write_text(text)
    cluster = load_cluster(path)
    found = series_problems(cluster.inventory, str(path), "22.05.8-4+deb12u3")
    expected = problem(text, "plugin: block", "topology.plugin", BLOCK_IN_2205).replace(FILE, str(path), 1)
    assert [str(one) for one in found] == [expected]
    assert series_problems(cluster.inventory, str(path), "24.11.5-4+deb13u1") == []
    assert series_problems(cluster.inventory, str(path), "") == []  # Slurm not installed yet


# ---- formats, whatever the series -----------------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["60", "30:00", "01:00:00", "7-0", "2-12:30", "1-00:00:00", "INFINITE", "UNLIMITED", "infinite"]
)
def test_slurm_time_formats_are_accepted(value):
    times = f'    max_time: "{value}"\n    default_time: "{value}"\n'
    text = edit(BASE, "    default: true\n", "    default: true\n" + times)
    assert problems(text) == []


@pytest.mark.parametrize("value", ["forever", "1d", "1:2:3:4", "-1", "1-", "1h"])
def test_max_time_must_be_a_slurm_time(value):
    text = edit(BASE, "    default: true\n", f'    default: true\n    max_time: "{value}"\n')
    message = (
        f"{value!r} is not a Slurm time: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS,"
        " INFINITE or UNLIMITED"
    )
    assert problems(text) == [problem(text, "max_time:", "partitions[0].max_time", message)]


def test_free_form_keys_in_slurm_formats():
    text = edit(
        BASE + "slurm:\n  conf:\n    DefMemPerCPU: 4G\n    SrunPortRange: 60001:63000\n"
        "    PriorityDecayHalfLife: 7days\n    MaxMemPerNode: UNLIMITED\n    OverTimeLimit: 5\n",
        "    default: true\n",
        "    default: true\n    options:\n      MaxMemPerCPU: yes\n",
    )
    assert problems(text) == [
        problem(text, "MaxMemPerCPU", "partitions[0].options.MaxMemPerCPU",
                "True: MaxMemPerCPU takes a whole number of megabytes, no unit (4096, not 4G)"),
        problem(text, "DefMemPerCPU", "slurm.conf.DefMemPerCPU",
                "'4G': DefMemPerCPU takes a whole number of megabytes, no unit (4096, not 4G)"),
        problem(text, "SrunPortRange", "slurm.conf.SrunPortRange",
                "'60001:63000': SrunPortRange takes a port range LOW-HIGH, 1 <= LOW <= HIGH <= 65535"),
        # the inventory owns it now (priority.decay_half_life, a Slurm time checked by the model)
        problem(text, "PriorityDecayHalfLife", "slurm.conf.PriorityDecayHalfLife",
                "set by the inventory: use priority.decay_half_life"),
    ]
    text = BASE + "priority:\n  decay_half_life: 7days\n"
    assert problems(text) == [
        problem(text, "decay_half_life", "priority.decay_half_life",
                "'7days' is not a Slurm time: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM,"
                " D-HH:MM:SS, INFINITE or UNLIMITED"),
    ]


def test_plan_refuses_a_plugin_the_hosts_series_lacks_where_no_version_is_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`plan` of an inventory without slurm.version, once the probe finds Debian 12's 22.05 on the
    hosts: topology/block is refused at its line (exit 2), accepted where the hosts run 24.11."""
    path = tmp_path / "inventory.yaml"
    text = (REPO / "inventories" / "local" / "inventory.yaml").read_text()
    path.write_text(text + "topology:\n  plugin: block\n  blocks:\n    - name: b1\n      nodes: node[1-3]\n")
    cluster = load_cluster(path)

    def plan_with_hosts_at(version: str) -> None:
        answer = {"localhost": HostProbe("localhost", packages={"slurm-client": version})}
        monkeypatch.setattr("cluster_cli.plan.probe_cluster", lambda *args: answer)
        plan_cluster(cluster, {}, b"k" * 1024, DeployedRecord(), ExpectedSecrets())

    with pytest.raises(InventoryError) as refused:
        plan_with_hosts_at("22.05.8-4+deb12u3")
    assert refused.value.exit_code == 2
    line = len(text.splitlines()) + 2
    assert f"{path}:{line}: topology.plugin:" in str(refused.value) and "topology/block" in str(refused.value)
    plan_with_hosts_at("24.11.5-4+deb13u1")
