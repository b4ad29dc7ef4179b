"""roles/slurm_common's configure phase decides restarts and reconfigures through the
slurm_conf_change filter, by the rules of the installed Slurm series (cluster_cli.slurm_facts).

Run in check mode: the files in place are read for real, nothing is written (the phase would
otherwise also write /etc/profile.d/slurm_conf.sh for the temporary configuration directory).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, run_play

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook not found")

SLURM_CONF = """\
ClusterName=test
SelectType=select/cons_tres
NodeName=node[1-2] CPUs=4
PartitionName=debug Nodes=node[1-2] MaxTime=01:00:00
"""
GRES_CONF = "NodeName=node[1-2] Name=gpu File=/dev/nvidia0\n"
CGROUP_CONF = "CgroupPlugin=cgroup/v2\n"


# The facts the slurmctld and slurmd roles read, and slurm_common_change.
FACTS_JSON = (
    "{{ {'flags': [slurm_common_restart_slurmctld, slurm_common_restart_slurmd, slurm_common_reconfigure],"
    " 'change': slurm_common_change} | to_json }}"
)


def configure(tmp_path: Path, new_slurm_conf: str, version: str) -> dict:
    """Apply the configure phase in check mode to files in place -> rendered ones: its facts."""
    in_place, rendered, result = tmp_path / "etc", tmp_path / "build", tmp_path / "change.json"
    for directory, slurm_conf in ((in_place, SLURM_CONF), (rendered, new_slurm_conf)):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "slurm.conf").write_text(slurm_conf)
        (directory / "gres.conf").write_text(GRES_CONF)
        (directory / "cgroup.conf").write_text(CGROUP_CONF)
    play = {
        "name": "slurm_common configure",
        "tasks": [
            {"ansible.builtin.include_role": {"name": "slurm_common", "tasks_from": "configure", "public": True}},
            {"ansible.builtin.copy": {"content": FACTS_JSON, "dest": str(result), "mode": "0600"}, "check_mode": False},
        ],
    }
    extra = {
        "slurm_common_config_src": str(rendered),
        "slurm_common_conf_dir": str(in_place),
        "slurm_common_pending_dir": str(tmp_path / "pending"),
        "slurm_common_version": version,
    }
    run = run_play(tmp_path / "work", play, {HOST: {}}, extra, options=("--check",))
    assert run.returncode == 0, run.explain()
    assert (in_place / "slurm.conf").read_text() == SLURM_CONF, "check mode copied the file"
    return json.loads(result.read_text())


def test_a_partition_change_only_reconfigures(tmp_path: Path) -> None:
    facts = configure(tmp_path, SLURM_CONF.replace("01:00:00", "02:00:00"), "22.05.8-4+deb12u3")
    assert facts["flags"] == [False, False, True]
    assert facts["change"]["reasons"] == [
        "slurm.conf: PartitionName debug changed (MaxTime): scontrol reconfigure"
        " (slurm.conf(5) PARTITION CONFIGURATION, Slurm 22.05)"
    ]


@pytest.mark.parametrize(
    ("version", "expected"),
    [("22.05.8-4+deb12u3", (True, True, False)), ("24.11.5-4+deb13u1", (False, False, True))],
)
def test_a_node_added_follows_the_installed_series(tmp_path: Path, version: str, expected: tuple) -> None:
    facts = configure(tmp_path, SLURM_CONF.replace("node[1-2]", "node[1-3]"), version)
    assert facts["flags"] == list(expected)
    assert facts["change"]["nodes_added"] == ["node3"] and facts["change"]["series"] == version[:5]


def test_without_a_known_version_the_oldest_series_rules_and_the_reasons_say_so(tmp_path: Path) -> None:
    facts = configure(tmp_path, SLURM_CONF.replace("node[1-2]", "node[1-3]"), "")
    assert facts["flags"] == [True, True, False]
    assert "Slurm version unknown has no rules here" in facts["change"]["reasons"][0]
