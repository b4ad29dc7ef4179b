"""Nodes allocated with no job (issue 32): the evidence read from slurmctld's own answers, as
`scontrol --oneliner show node` and `squeue --states=all` print them (Slurm 22.05 on the local
cluster)."""

from __future__ import annotations

import time
from pathlib import Path

from cluster_cli.stranded import NodeAllocation, StrandedNode, parse_jobs, parse_nodes, stranded_nodes

IDLE = ("NodeName=node1 Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.99 "
        "Gres=gpu:fake:1 NodeAddr=localhost RealMemory=3072 AllocMem=0 FreeMem=22946 State=IDLE "
        "LastBusyTime=2026-11-27T18:30:53 CfgTRES=cpu=2,mem=3G,billing=2,gres/gpu=1 AllocTRES= CapWatts=n/a")
HELD = ("NodeName=node2 Arch=x86_64 CoresPerSocket=2  CPUAlloc=2 CPUEfctv=2 CPUTot=2 RealMemory=3072 "
        "AllocMem=3072 State=MIXED LastBusyTime=2026-11-27T18:20:00 "
        "CfgTRES=cpu=2,mem=3G,billing=2,gres/gpu=1 AllocTRES=cpu=2,mem=3G,gres/gpu=1 CapWatts=n/a")
BUSY = HELD.replace("node2", "node3")
NOW = time.mktime(time.strptime("2026-11-27T18:31:40", "%Y-%m-%dT%H:%M:%S"))


def test_the_allocated_figures_are_read_per_node() -> None:
    idle, held = parse_nodes(f"{IDLE}\n{HELD}\n")
    assert (idle.name, idle.allocated, idle.gpus) == ("node1", False, 0)
    assert (held.cpus, held.memory_mb, held.gpus, held.allocated) == (2, 3072, 1, True)


def test_a_node_allocated_after_its_last_job_ended_is_stranded_with_its_evidence() -> None:
    jobs = "14|COMPLETED|2026-11-27T18:30:53|node[1-3]\n15|RUNNING|2026-11-27T19:31:00|node3\n16|PENDING|N/A|\n"
    found = stranded_nodes(parse_nodes(f"{IDLE}\n{HELD}\n{BUSY}"), parse_jobs(jobs), now=NOW)
    assert found == [StrandedNode("node2", (
        "node2: mixed with 2 CPUs, 3072 MB and 1 GPUs allocated (scontrol show node) but no job on it "
        "(squeue -w node2: none); its last job ended 47 s ago"))]


def test_a_release_within_the_grace_after_the_job_ended_is_not_yet_stranded() -> None:
    jobs = parse_jobs("14|COMPLETED|2026-11-27T18:31:30|node2\n")
    assert stranded_nodes(parse_nodes(HELD), jobs, now=NOW) == []
    assert [node.name for node in stranded_nodes(parse_nodes(HELD), jobs, now=NOW + 30)] == ["node2"]


def test_a_completing_job_still_holds_its_node_and_an_unknown_last_job_is_said_so() -> None:
    assert stranded_nodes(parse_nodes(HELD), parse_jobs("14|COMPLETING|2026-11-27T18:00:00|node2\n"), now=NOW) == []
    (found,) = stranded_nodes(parse_nodes(HELD), [], now=NOW)
    assert found.evidence.endswith("no job that ran there is still known to slurmctld")


def test_from_sinfo_alone_a_mixed_node_without_a_job_is_stranded_and_an_idle_one_is_not() -> None:
    nodes = [NodeAllocation("node1", "idle"), NodeAllocation("node2", "mixed"), NodeAllocation("node3", "allocated")]
    jobs = parse_jobs("15|RUNNING|2026-11-27T19:31:00|node3\n")
    (found,) = stranded_nodes(nodes, jobs, now=NOW)
    assert found.evidence.startswith("node2: mixed (sinfo) but no job on it")


def test_plan_names_a_node_allocated_with_no_job_before_a_deploy(tmp_path: Path) -> None:
    from test_plan import _converged_probe, _plan, _rendered
    from unit_helpers import local_cluster

    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    probe.controller["nodes"][1]["state"] = "mixed"
    probe.controller["jobs"] = [{"id": "9", "state": "COMPLETED", "user": "smoke", "nodes": "node2",
                                 "end": "2020-01-01T00:00:00"}]
    plan = _plan(cluster, rendered, probe)
    assert [line.split(":")[0] for line in plan.stranded] == ["node2"] and plan.to_json()["stranded"] == plan.stranded
    assert plan.changes == []
    probe.controller["jobs"][0]["state"] = "RUNNING"
    assert _plan(cluster, rendered, probe).stranded == []
