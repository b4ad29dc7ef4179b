"""The compute play's waves for real: its header lines (serial, max_fail_percentage) copied from
playbooks/site.yml onto a tiny play over six local-connection hosts, run by cluster-cli's runner
with its callback, one host made to fail; then what deploy would say (cluster_cli.rollout).

Ansible's rule, proven here: per wave, the run stops when the failed hosts are MORE than
max_fail_percentage of the wave (one of four is 25%: 25 goes on, 24 stops), or when every host of
a wave failed, whatever the percentage; the plays after it then run on no host.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from role_runner import REPO, TARGET_PYTHON, ansible_playbook

from cluster_cli.ansible.runner import PlaybookResult, run_playbook
from cluster_cli.rollout import COMPUTE_PLAY, outcome

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

HOSTS = [f"c{number}" for number in range(1, 7)]
LAST_PLAY = "After the compute hosts"
SECRET = "s3cr3t-in-a-no-log-task"


def compute_play_header() -> dict[str, Any]:
    """site.yml's compute play without its roles: name, hosts, serial, max_fail_percentage."""
    plays = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text(encoding="utf-8"))
    [play] = [play for play in plays if play.get("name") == COMPUTE_PLAY]
    assert "serial" in play and "max_fail_percentage" in play, "the compute play no longer goes in waves"
    return {key: value for key, value in play.items() if key != "roles"}


def run_waves(
    tmp_path: Path, bad: list[str], run_vars: dict[str, Any], gone: tuple[str, ...] = (),
) -> PlaybookResult:
    """The play over c1..c6: the ``bad`` hosts fail, the ``gone`` ones are unreachable (SSH to a closed port)."""
    tasks = [
        # the failing host's message is a secret in a no_log task: the events must not carry it
        {"name": "Fail on a bad host", "ansible.builtin.fail": {"msg": SECRET}, "no_log": True,
         "when": "inventory_hostname in bad_hosts"},
        {"name": "Deploy", "ansible.builtin.command": {"argv": ["true"]}, "changed_when": False},
    ]
    playbook = [{**compute_play_header(), "tasks": tasks},
                {"name": LAST_PLAY, "hosts": "slurm_compute", "gather_facts": False,
                 "tasks": [{"name": "Done", "ansible.builtin.command": {"argv": ["true"]}, "changed_when": False}]}]
    local = {"ansible_connection": "local", "ansible_python_interpreter": TARGET_PYTHON}
    closed = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1}
    inventory = {"all": {"children": {"slurm_compute": {
        "hosts": {host: closed if host in gone else local for host in HOSTS}}}}}
    for name, document in {"play.yml": playbook, "inventory.yml": inventory,
                           "vars.yml": {"bad_hosts": bad, **run_vars}}.items():
        (tmp_path / name).write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return run_playbook(tmp_path / "play.yml", [tmp_path / "inventory.yml"], [tmp_path / "vars.yml"],
                        tmp_path / "run.log")


def ended_on(result: PlaybookResult) -> dict[str, list[str]]:
    """Which hosts were deployed, failed, cut off with their wave, or never reached."""
    found = outcome(result, HOSTS, HOSTS, LAST_PLAY)
    stopped = found.failed_hosts | set(found.cut_off)
    return {"deployed": found.deployed, "failed": sorted(found.failed_hosts), "cut_off": found.cut_off,
            "not_reached": [host for host in HOSTS if host not in found.in_compute_play | stopped]}


@pytest.mark.parametrize(("run_vars", "expected"), [
    # waves of two, 50%: one bad host of a wave is not more than half; every other host is deployed
    ({"deploy_slurmd_serial": 2, "deploy_max_fail_percentage": 50},
     {"deployed": ["c1", "c2", "c4", "c5", "c6"], "failed": ["c3"], "cut_off": [], "not_reached": []}),
    # waves of two, 0 (the default with --batch): the bad host stops its wave and the rollout
    ({"deploy_slurmd_serial": 2, "deploy_max_fail_percentage": 0},
     {"deployed": [], "failed": ["c3"], "cut_off": ["c4"], "not_reached": ["c5", "c6"]}),
    ({"deploy_slurmd_serial": 2},
     {"deployed": [], "failed": ["c3"], "cut_off": ["c4"], "not_reached": ["c5", "c6"]}),
    # waves of four: one bad host is exactly 25%, which is not more than 25 ...
    ({"deploy_slurmd_serial": 4, "deploy_max_fail_percentage": 25},
     {"deployed": ["c1", "c2", "c4", "c5", "c6"], "failed": ["c3"], "cut_off": [], "not_reached": []}),
    # ... but more than 24
    ({"deploy_slurmd_serial": 4, "deploy_max_fail_percentage": 24},
     {"deployed": [], "failed": ["c3"], "cut_off": ["c1", "c2", "c4"], "not_reached": ["c5", "c6"]}),
    # a wave of one host that failed stops the run even at 100%
    ({"deploy_slurmd_serial": 1, "deploy_max_fail_percentage": 100},
     {"deployed": [], "failed": ["c3"], "cut_off": [], "not_reached": ["c4", "c5", "c6"]}),
    # no waves (no --batch): 100 by default, the bad host stops nobody else
    ({}, {"deployed": ["c1", "c2", "c4", "c5", "c6"], "failed": ["c3"], "cut_off": [], "not_reached": []}),
])
def test_one_bad_host_stops_the_rollout_only_above_the_threshold(tmp_path: Path, run_vars, expected) -> None:
    result = run_waves(tmp_path, ["c3"], run_vars)
    assert ended_on(result) == expected, (tmp_path / "run.log").read_text()[-4000:]
    [failure] = result.failures
    assert (failure.host, failure.play, failure.task) == ("c3", COMPUTE_PLAY, "Fail on a bad host")
    assert SECRET not in str(result.failures) and "no_log: true" in failure.message
    assert result.returncode != 0


def test_every_host_is_deployed_when_none_fails(tmp_path: Path) -> None:
    result = run_waves(tmp_path, [], {"deploy_slurmd_serial": 2, "deploy_max_fail_percentage": 0})
    assert result.returncode == 0 and result.failures == []
    assert ended_on(result)["deployed"] == HOSTS


def test_an_unreachable_host_does_not_count_towards_the_threshold(tmp_path: Path) -> None:
    """Ansible counts failed hosts only: at 0% the wave with an unreachable host goes on, and so does
    the rollout (docs/operations.md says so)."""
    result = run_waves(tmp_path, [], {"deploy_slurmd_serial": 2, "deploy_max_fail_percentage": 0}, gone=("c3",))
    assert ended_on(result) == {"deployed": ["c1", "c2", "c4", "c5", "c6"], "failed": ["c3"], "cut_off": [],
                                "not_reached": []}, (tmp_path / "run.log").read_text()[-4000:]
    [failure] = result.failures
    assert failure.unreachable and failure.play == COMPUTE_PLAY
