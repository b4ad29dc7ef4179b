"""cluster-cli health: the checker run on each compute host, its answers read into per-node
verdicts, the exit code. The hosts' answers are given here as the checker prints them
(tests/unit/test_health_check.py runs the checker itself)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from cluster_cli import health
from cluster_cli.cli import main
from cluster_cli.loader import load_cluster, load_cluster_text
from cluster_cli.render.health_conf import HEALTH_PROGRAM_PATH

REPO = Path(__file__).resolve().parents[2]
HETERO = REPO / "inventories" / "examples" / "hetero-local.yaml"
MINIMAL = REPO / "inventories" / "examples" / "minimal.yaml"


def checker_output(results: list[dict[str, object]]) -> str:
    return json.dumps({"nodes": results})


def passing(node: str) -> dict[str, object]:
    return {"node": node, "passed": True, "evidence": [], "action": "", "state": "idle", "reason": ""}


class FakeHosts:
    """HostCommand's stand-in: each host answers with ``answers[host]`` (exit code, output)."""

    sent: ClassVar[list[tuple[str, list[str]]]] = []
    answers: ClassVar[dict[str, tuple[int, str]]] = {}
    # slurmctld's answers to the stranded-node questions (scontrol, squeue), asked of the controller
    slurm: ClassVar[dict[str, tuple[int, str]]] = {}

    def __init__(self, cluster: object, workdir: Path):
        FakeHosts.sent = []

    def run(self, host: str, argv: list[str], timeout_s: float = 30) -> tuple[int, str]:
        if argv[0] in ("scontrol", "squeue"):
            return FakeHosts.slurm.get(argv[0], (0, ""))
        FakeHosts.sent.append((host, argv))
        return FakeHosts.answers[host]


@pytest.fixture
def hosts(monkeypatch: pytest.MonkeyPatch) -> type[FakeHosts]:
    monkeypatch.setattr(health, "HostCommand", FakeHosts)
    FakeHosts.slurm = {}
    return FakeHosts


def hetero_answer() -> tuple[int, str]:
    failing = {"node": "l4-1", "passed": False, "evidence": ["gpu /dev/fake-gpu/nvidia4 missing"],
               "action": "drain", "state": "idle", "reason": ""}
    names = ["h100-1", "h100-2", "cpu1", "cpu2"]
    return 1, checker_output([passing(name) for name in names] + [failing])


def test_verdicts_come_in_inventory_order_and_one_failure_makes_it_unhealthy(hosts: type[FakeHosts]) -> None:
    hosts.answers = {"localhost": hetero_answer()}
    report = health.run_health(load_cluster(HETERO))
    assert hosts.sent == [("localhost", [HEALTH_PROGRAM_PATH, "--all", "--json"])]
    assert [verdict.node for verdict in report.nodes] == ["h100-1", "h100-2", "l4-1", "cpu1", "cpu2"]
    assert not report.healthy
    assert health.verdict_line(report.nodes[2]).split() == [
        "l4-1", "localhost", "FAIL", "gpu", "/dev/fake-gpu/nvidia4", "missing", "(drain)"]


def test_no_act_asks_the_checker_only_to_report(hosts: type[FakeHosts]) -> None:
    hosts.answers = {"localhost": hetero_answer()}
    assert not health.run_health(load_cluster(HETERO), act=False).acted
    assert hosts.sent[0][1][-1] == "--no-act"


def test_every_compute_host_is_asked_and_none_other(hosts: type[FakeHosts]) -> None:
    cluster = load_cluster(MINIMAL)
    compute = [name for name, host in cluster.hosts.items() if host.slurmd_nodes]
    hosts.answers = {name: (0, checker_output([passing(node.name) for node in cluster.hosts[name].slurmd_nodes]))
                     for name in compute}
    report = health.run_health(cluster)
    assert sorted(host for host, _ in hosts.sent) == sorted(compute)
    assert report.healthy and len(report.nodes) == len(cluster.nodes)


def test_a_host_without_the_checker_is_an_error_for_each_of_its_nodes(hosts: type[FakeHosts]) -> None:
    hosts.answers = {"localhost": (127, f"{HEALTH_PROGRAM_PATH}: not installed")}
    report = health.run_health(load_cluster(HETERO))
    assert len(report.nodes) == 5 and not report.healthy
    assert all("is not installed" in verdict.error for verdict in report.nodes)


def test_a_node_the_checker_left_out_is_an_error(hosts: type[FakeHosts]) -> None:
    hosts.answers = {"localhost": (0, checker_output([passing("h100-1")]))}
    report = health.run_health(load_cluster(HETERO))
    assert [verdict.node for verdict in report.nodes if verdict.error] == ["h100-2", "l4-1", "cpu1", "cpu2"]


def test_refused_when_the_inventory_turns_the_check_off() -> None:
    text = MINIMAL.read_text(encoding="utf-8") + "\nhealth_check:\n  enabled: false\n"
    with pytest.raises(health.RefusedError, match="health_check.enabled is false"):
        health.run_health(load_cluster_text(text, "inv.yaml"))


def test_the_cli_prints_json_and_exits_1_on_a_failure(hosts: type[FakeHosts]) -> None:
    hosts.answers = {"localhost": hetero_answer()}
    result = CliRunner().invoke(main, ["health", str(HETERO), "--json"])
    assert result.exit_code == 1, result.output
    document = json.loads(result.output)
    assert (document["healthy"], document["acted"]) == (False, True)
    assert [node["node"] for node in document["nodes"] if not node["passed"]] == ["l4-1"]


def test_the_cli_exits_0_when_every_node_passes(hosts: type[FakeHosts]) -> None:
    names = ["h100-1", "h100-2", "l4-1", "cpu1", "cpu2"]
    hosts.answers = {"localhost": (0, checker_output([passing(name) for name in names]))}
    result = CliRunner().invoke(main, ["health", str(HETERO), "--no-act"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "health: 5 of 5 nodes pass (reported only: nothing drained or resumed)"


# What run_ad_hoc returns for a remote host (Ansible's own exit 2 when the command fails), as
# captured from `ansible HOST -m ansible.builtin.command` running the checker.
ANSIBLE_FAILED = (
    "Origin: <adhoc 'ansible.builtin.command' task>\n\n{'action': 'ansible.builtin.command', 'args': "
    "{'argv': ['/usr/local/sbin/cluster-cli-health', '--all', '--json'] [...]\n\nlocalhost | FAILED | rc=1 >>\n"
    '{\n  "nodes": [\n    {\n      "action": "drain",\n      "evidence": [\n        "gpu /dev/fake-gpu/nvidia9 '
    'missing"\n      ],\n      "node": "l4-1",\n      "passed": false,\n      "reason": "",\n      "state": "idle"\n'
    "    }\n  ]\n}non-zero return code"
)
ANSIBLE_NOT_INSTALLED = (
    "Origin: <adhoc 'ansible.builtin.command' task>\n\n{'action': 'ansible.builtin.command', 'args': "
    "{'argv': ['/usr/local/sbin/cluster-cli-health', '--all']}, [...]\n\nlocalhost | FAILED | rc=2 >>\n"
    "Error executing command."
)


def test_a_failing_check_through_ansible_is_read_from_after_its_header() -> None:
    host = load_cluster(HETERO).hosts["localhost"]
    verdicts = {verdict.node: verdict for verdict in health.parse_host(host, 2, ANSIBLE_FAILED)}
    assert verdicts["l4-1"].evidence == ["gpu /dev/fake-gpu/nvidia9 missing"] and not verdicts["l4-1"].error
    assert verdicts["l4-1"].action == "drain"
    assert verdicts["cpu1"].error == "the checker did not report this node"


def test_a_checker_missing_through_ansible_says_so() -> None:
    host = load_cluster(HETERO).hosts["localhost"]
    verdicts = health.parse_host(host, 2, ANSIBLE_NOT_INSTALLED)
    assert {verdict.error for verdict in verdicts} == {
        f"{HEALTH_PROGRAM_PATH} is not installed (deploy with health_check.enabled): Error executing command."}


def test_a_node_allocated_with_no_job_makes_it_unhealthy_with_its_evidence_and_is_not_drained(
    hosts: type[FakeHosts],
) -> None:
    names = ["h100-1", "h100-2", "l4-1", "cpu1", "cpu2"]
    hosts.answers = {"localhost": (0, checker_output([passing(name) for name in names]))}
    hosts.slurm = {"scontrol": (0, "NodeName=cpu2 CPUAlloc=2 AllocMem=2048 State=MIXED AllocTRES=cpu=2,mem=2G\n"),
                   "squeue": (0, "7|COMPLETED|2020-01-01T00:00:00|cpu[1-2]\n")}
    result = CliRunner().invoke(main, ["health", str(HETERO)])
    assert result.exit_code == 1, result.output
    assert "allocated with no job: cpu2: mixed with 2 CPUs, 2048 MB and 0 GPUs allocated" in result.output
    assert "health: 5 of 5 nodes pass" in result.output
    assert [argv[0] for _, argv in hosts.sent] == [HEALTH_PROGRAM_PATH]
