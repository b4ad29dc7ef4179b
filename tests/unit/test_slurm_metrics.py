"""cluster_cli.exporters.slurm_metrics from outputs Debian's Slurm 22.05 (Debian 12), 24.11
(Debian 13) and 26.05 (Debian forky) printed for the exporter's own commands (a draining node with
a running, a pending and a held job; tests/unit/data/slurm_metrics/<series>), and its behaviour
when slurmctld or slurmdbd stop answering."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import pytest

from cluster_cli.exporters import slurm_metrics as metrics
from cluster_cli.exporters.text_format import Sample

DATA = Path(__file__).parent / "data" / "slurm_metrics"


def _local(timestamp: str) -> float:
    """squeue's %V is the controller's local time, read back so by the exporter."""
    return datetime.fromisoformat(timestamp).timestamp()


#: series -> (the last pending job's submit time in its squeue.txt, the figures only that series has)
SERIES: dict[str, tuple[float, list[Sample]]] = {
    "22.05": (_local("2026-11-27T22:20:54"), [
        ("scheduler", {"figure": "server_threads"}, 3), ("scheduler", {"figure": "jobs_submitted"}, 9),
        ("scheduler", {"figure": "jobs_started"}, 7), ("scheduler", {"figure": "jobs_completed"}, 6),
        ("scheduler", {"figure": "main_last_cycle"}, 23), ("scheduler", {"figure": "main_max_cycle"}, 499),
        ("scheduler", {"figure": "main_total_cycles"}, 4), ("scheduler", {"figure": "main_mean_cycle"}, 271),
    ]),
    # 24.11.5: sdiag adds "RPC queue enabled", "Main scheduler exit", "Backfill exit", RPCs by user and
    # pending RPCs; gres.conf named no Cores, so sinfo's Gres has no "(S:0)"
    "24.11": (_local("2026-11-29T04:27:48"), [
        ("scheduler", {"figure": "server_threads"}, 1), ("scheduler", {"figure": "jobs_submitted"}, 6),
        ("scheduler", {"figure": "jobs_started"}, 4), ("scheduler", {"figure": "jobs_completed"}, 3),
        ("scheduler", {"figure": "main_last_cycle"}, 38), ("scheduler", {"figure": "main_max_cycle"}, 535),
        ("scheduler", {"figure": "main_total_cycles"}, 5), ("scheduler", {"figure": "main_mean_cycle"}, 197),
    ]),
    # 26.05.5 (Debian forky): the same commands print the same shape as 24.11's
    "26.05": (_local("2026-11-29T04:30:40"), [
        ("scheduler", {"figure": "server_threads"}, 1), ("scheduler", {"figure": "jobs_submitted"}, 6),
        ("scheduler", {"figure": "jobs_started"}, 4), ("scheduler", {"figure": "jobs_completed"}, 3),
        ("scheduler", {"figure": "main_last_cycle"}, 37), ("scheduler", {"figure": "main_max_cycle"}, 501),
        ("scheduler", {"figure": "main_total_cycles"}, 3), ("scheduler", {"figure": "main_mean_cycle"}, 322),
    ]),
}  # fmt: skip


# The 22.05 recording's last submit time: the dashboards' test scrapes that recording too.
SUBMITTED = SERIES["22.05"][0]


def _figures(samples: list[Sample]) -> list[tuple[str, float]]:
    return sorted((labels["figure"], value) for name, labels, value in samples if name == "scheduler")


def recorded(argv: list[str], series: str = "22.05") -> metrics.Answer:
    return metrics.Answer(True, (DATA / series / f"{argv[0]}.txt").read_text())


@pytest.mark.parametrize("series", sorted(SERIES))
def test_the_recorded_cluster_as_metrics(series: str) -> None:
    submitted, own = SERIES[series]
    samples = metrics.Exporter(run=lambda argv: recorded(argv, series), clock=lambda: submitted + 9).scrape()
    expected = [
        ("up", {}, 1), ("stale_seconds", {}, 0),
        ("nodes", {"partition": "gpu", "state": "draining"}, 1),
        ("drained_nodes", {"reason": "gpu 1 hot", "by": "root"}, 1),
        ("allocated_nodes_without_job", {}, 0),
        ("cpus", {"partition": "gpu", "state": "allocated"}, 1), ("cpus", {"partition": "gpu", "state": "total"}, 2),
        ("memory_bytes", {"partition": "gpu", "state": "allocated"}, 11449 << 20),
        ("memory_bytes", {"partition": "gpu", "state": "total"}, 22899 << 20),
        ("gpus", {"partition": "gpu", "type": "h200", "state": "allocated"}, 1),
        ("gpus", {"partition": "gpu", "type": "h200", "state": "total"}, 2),
        ("jobs", {"partition": "gpu", "account": "", "state": "pending"}, 2),
        ("jobs", {"partition": "gpu", "account": "", "state": "running"}, 1),
        ("pending_jobs", {"partition": "gpu", "reason": "JobHeldUser"}, 1),
        ("pending_jobs", {"partition": "gpu", "reason": "NodeDown"}, 1),
        ("queue_wait_max_seconds", {"partition": "gpu"}, 9), ("queue_wait_seconds_sum", {"partition": "gpu"}, 18),
        ("scheduler", {"figure": "agent_queue"}, 0), ("scheduler", {"figure": "dbd_agent_queue"}, 0),
        ("scheduler", {"figure": "jobs_canceled"}, 0), ("scheduler", {"figure": "jobs_failed"}, 0),
        ("scheduler", {"figure": "backfill_last_cycle"}, 0), ("scheduler", {"figure": "backfill_max_cycle"}, 0),
        ("scheduler", {"figure": "backfill_total_cycles"}, 0),
        *own,
    ]  # fmt: skip
    for sample in expected:
        assert sample in samples, sample
    # every figure once, and nothing from the sections sdiag 24.11 added ("Main scheduler exit" ...)
    assert _figures(samples) == _figures(expected)
    assert sum(value for name, _, value in samples if name == "nodes") == 1


def test_when_slurmctld_stops_answering_the_last_figures_are_served_marked_stale() -> None:
    now = [1000.0]
    answering = [True]
    exporter = metrics.Exporter(run=lambda argv: recorded(argv) if answering[0] else metrics.Answer(False, "down"),
                                clock=lambda: now[0])
    good = exporter.scrape()
    answering[0], now[0] = False, 1030.0
    stale = exporter.scrape()
    assert ("up", {}, 0) in stale and ("stale_seconds", {}, 30.0) in stale
    assert [s for s in stale if s[0] == "nodes"] == [s for s in good if s[0] == "nodes"]
    text = metrics.exposition(stale)
    assert "cluster_slurm_up 0\n" in text and "cluster_slurm_stale_seconds 30\n" in text


def test_before_any_answer_nothing_but_up_0_is_served() -> None:
    samples = metrics.Exporter(run=lambda argv: metrics.Answer(False, "down")).scrape()
    assert [name for name, _, _ in samples] == ["up", "stale_seconds", "scrape_seconds"]


@pytest.mark.parametrize("answers", [True, False])
def test_slurmdbd_is_asked_with_accounting(answers: bool) -> None:
    def run(argv: list[str]) -> metrics.Answer:
        return metrics.Answer(answers, "x") if argv[0] == "sacctmgr" else recorded(argv)

    assert ("slurmdbd_up", {}, int(answers)) in metrics.Exporter(accounting=True, run=run).scrape()
    assert not [s for s in metrics.Exporter(run=run).scrape() if s[0] == "slurmdbd_up"]


def test_a_call_that_hangs_is_cut_at_its_timeout() -> None:
    answer = metrics.call([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert not answer.ok and "timed out" in answer.text


@pytest.mark.parametrize(("gres", "counts"), [
    ("gpu:h100:8(S:0-1)", {"h100": 8}), ("gpu:4", {"": 4}), ("(null)", {}),
    ("gpu:h100:2(IDX:0-1),gpu:a100:1(IDX:2)", {"h100": 2, "a100": 1}), ("gpu:h200:0(IDX:N/A)", {"h200": 0}),
])  # fmt: skip
def test_gpu_gres_strings(gres: str, counts: dict[str, int]) -> None:
    assert metrics.gpu_counts(gres) == counts


@pytest.mark.parametrize(("state", "label"), [
    ("idle", "idle"), ("IDLE*", "idle+not_responding"), ("mixed+drain", "mixed+drain"), ("drained", "drained"),
    ("down*", "down+not_responding"), ("allocated#", "allocated"),
])  # fmt: skip
def test_node_state_labels(state: str, label: str) -> None:
    assert metrics.node_state(state) == label


def test_a_node_in_two_partitions_counts_once_among_the_drained() -> None:
    line = "n1|{}|drained|0/0/4/4|1000|0|(null)|gpu:0|slurm|disk full\n"
    samples = metrics.node_samples(line.format("a*") + line.format("b"))
    assert ("drained_nodes", {"reason": "disk full", "by": "slurm"}, 1) in samples
    assert ("nodes", {"partition": "a", "state": "drained"}, 1) in samples
    assert ("nodes", {"partition": "b", "state": "drained"}, 1) in samples


def test_the_monitoring_page_lists_every_slurm_metric() -> None:
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "monitoring.md").read_text()
    listed = set(re.findall(r"^\| `cluster_slurm_(\w+)` \| (\w+) \|", page, re.MULTILINE))
    assert listed == {(name, kind) for name, (kind, _) in metrics.METRICS.items()}


def test_the_scale_benchmark_scrapes_what_it_made() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import slurm_exporter

    samples = metrics.node_samples(slurm_exporter.sinfo_text(30))
    assert sum(value for name, labels, value in samples if name == "nodes") == 30
    jobs = metrics.job_samples(slurm_exporter.squeue_text(40), now=2e9)
    assert sum(value for name, labels, value in jobs if name == "jobs") == 40


def test_an_allocated_node_that_no_job_lists_is_counted() -> None:
    sinfo = ("n1|p|mixed|2/2/0/4|1000|500|(null)|gpu:0|||\nn2|p|allocated|4/0/0/4|1000|1000|(null)|gpu:0||\n"
             "n3|p|draining|4/0/0/4|1000|1000|(null)|gpu:0|root|maint\nn4|p|idle|0/4/0/4|1000|0|(null)|gpu:0||\n")
    squeue = "p|a|RUNNING|None|2026-11-27T22:20:54|n[1,3]\np|a|PENDING|Resources|2026-11-27T22:20:54|\n"
    samples = metrics.Exporter(run=lambda argv: metrics.Answer(True, {"sinfo": sinfo, "squeue": squeue, "sdiag": ""}
                                                               [argv[0]])).scrape()
    assert ("allocated_nodes_without_job", {}, 1) in samples  # n2
