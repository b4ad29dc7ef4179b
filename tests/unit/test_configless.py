"""Configless mode (slurm.configless): the rendered key merged with the overrides, and what it
refuses (resolve/configless.py, resolve/overrides.py). The role variables are in
test_role_variables.py, the roles in tests/ansible/test_configless_roles.py."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, SHIPPED_INVENTORIES, edit, load, problem, problems

from cluster_cli.loader import load_cluster
from cluster_cli.render.common import add_list_items
from cluster_cli.render.slurm_conf import render_slurm_conf

# without the preemption signal's item (render/priority.py), SlurmctldParameters is configless's alone
BASE = BASE + "priority:\n  preemption:\n    send_user_signal: false\n"
CONFIGLESS = BASE + "slurm:\n  configless: true\n"


def slurmctld_parameters(text: str) -> list[str]:
    lines = render_slurm_conf(load(text)).splitlines()
    return [line for line in lines if line.lower().startswith("slurmctldparameters=")]


# -- slurm.conf ------------------------------------------------------------------------------------


def test_configless_renders_enable_configless():
    assert slurmctld_parameters(CONFIGLESS) == ["SlurmctldParameters=enable_configless"]


def test_without_configless_there_is_no_slurmctld_parameters_line():
    assert slurmctld_parameters(BASE) == []
    assert slurmctld_parameters(BASE + "slurm:\n  configless: false\n") == []


def test_enable_configless_joins_the_items_an_override_sets():
    text = CONFIGLESS + "  conf:\n    SlurmctldParameters: idle_on_node_suspend,cloud_dns\n"
    assert slurmctld_parameters(text) == ["SlurmctldParameters=idle_on_node_suspend,cloud_dns,enable_configless"]


def test_the_override_keeps_its_spelling_of_the_key():
    text = CONFIGLESS + "  conf:\n    slurmctldparameters: idle_on_node_suspend\n"
    assert slurmctld_parameters(text) == ["slurmctldparameters=idle_on_node_suspend,enable_configless"]


def test_an_override_deleting_the_key_still_leaves_enable_configless():
    text = CONFIGLESS + "  conf:\n    SlurmctldParameters: null\n"
    assert slurmctld_parameters(text) == ["SlurmctldParameters=enable_configless"]


def test_add_list_items_adds_no_duplicate_and_matches_names_without_case():
    settings = {"SlurmctldParameters": "Enable_Configless,x=1", "KillWait": 30}
    merged = add_list_items(settings, {"slurmctldparameters": ["enable_configless", "x=2", "y"]})
    assert merged == {"SlurmctldParameters": "Enable_Configless,x=1,y", "KillWait": 30}
    assert add_list_items({}, {"SlurmctldParameters": ["enable_configless"]}) == {
        "SlurmctldParameters": "enable_configless"
    }


def test_the_shipped_configless_example_renders_the_key_once():
    conf = render_slurm_conf(load_cluster(SHIPPED_INVENTORIES["gpu-cluster"]))
    assert [line for line in conf.splitlines() if "configless" in line] == [
        "SlurmctldParameters=enable_configless,preempt_send_user_signal"
    ]


# -- what it refuses -------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["enable_configless", "idle_on_node_suspend,Enable_Configless"])
@pytest.mark.parametrize("configless", ["false", "true"])
def test_an_override_may_not_write_enable_configless(value, configless):
    text = BASE + f"slurm:\n  configless: {configless}\n  conf:\n    SlurmctldParameters: {value}\n"
    assert problems(text) == [
        problem(
            text,
            "SlurmctldParameters:",
            "slurm.conf.SlurmctldParameters",
            "enable_configless is set by the inventory: use slurm.configless",
        )
    ]


def test_other_slurmctld_parameters_are_the_site_s_own():
    assert problems(BASE + "slurm:\n  conf:\n    SlurmctldParameters: idle_on_node_suspend\n") == []


@pytest.mark.parametrize("version", ["19.05.5-1", "1:19.05.8-1", "18.08.5.2-1"])
def test_configless_needs_slurm_20_02(version):
    text = CONFIGLESS + f"  version: {version}\n"
    assert problems(text) == [
        problem(
            text, "configless: true", "slurm.configless", f"needs Slurm 20.02 or newer; slurm.version pins {version}"
        )
    ]


@pytest.mark.parametrize("version", ["20.02.0-1", "22.05.8-4+deb12u3", "24.11.5-1", "local-build"])
def test_configless_takes_slurm_20_02_and_later(version):
    assert problems(CONFIGLESS + f"  version: {version}\n") == []


def test_an_old_version_is_fine_without_configless():
    assert problems(BASE + "slurm:\n  version: 19.05.5-1\n") == []


def test_a_controller_named_by_an_ipv6_address_cannot_be_a_conf_server():
    text = edit(CONFIGLESS, "    address: 10.0.0.1\n", "    address: fd00::1\n")
    assert problems(text) == [
        problem(
            text,
            "primary: head",
            "controllers.primary",
            "configless: slurmd's --conf-server cannot name head by its IPv6 address fd00::1 "
            "(Slurm splits host and port at the first ':'); give the host a name or an IPv4 address",
        )
    ]
    assert problems(edit(BASE, "    address: 10.0.0.1\n", "    address: fd00::1\n")) == []
