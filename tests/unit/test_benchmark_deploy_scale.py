"""benchmarks/deploy_scale.py's pure parts (issue 17 items 1 and 2): the fit of cost = fixed + per host x
hosts, the projection's three bounds, the per-task profile from the event log, and the inventory it
deploys."""

from __future__ import annotations

import json
import sys

import pytest
from unit_helpers import REPO

from cluster_cli.loader import load_cluster_text


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import deploy_scale
    import scale_model
    import scale_report
    import task_profile

    yield {"model": scale_model, "profile": task_profile, "report": scale_report, "scale": deploy_scale}
    sys.path.remove(str(REPO / "benchmarks"))


def test_the_fit_of_points_on_a_line_is_that_line(bench):
    fit = bench["model"].fit_line([2, 4, 8], [14.0, 22.0, 38.0])
    assert fit.fixed == pytest.approx(6.0)
    assert fit.per_host == pytest.approx(4.0)
    assert fit.at(1000) == pytest.approx(4006.0)


def test_the_fit_of_noisy_points_is_least_squares(bench):
    fit = bench["model"].fit_line([2, 4, 8, 8], [10.0, 13.0, 20.0, 22.0])
    # slope = Sxy / Sxx over the means (5.5, 16.25)
    assert fit.per_host == pytest.approx((-3.5 * -6.25 + -1.5 * -3.25 + 2.5 * 3.75 + 2.5 * 5.75) / (12.25 + 2.25 + 6.25 * 2))
    assert fit.fixed == pytest.approx(16.25 - fit.per_host * 5.5)


def test_one_host_count_is_no_fit(bench):
    with pytest.raises(ValueError, match="two or more"):
        bench["model"].fit_line([4, 4], [10.0, 11.0])


def test_the_projection_takes_the_longest_of_its_three_bounds(bench):
    model = bench["model"]
    cpu = model.Fit(fixed=20.0, per_host=3.0, points=3)
    main = model.Fit(fixed=5.0, per_host=1.0, points=3)
    item = model.project(1000, cpu, main, chain_s=60.0, forks=32, cores=16)
    assert item.cpu_s == pytest.approx(3020.0)
    assert item.main_s == pytest.approx(1005.0)
    assert item.spread_s == pytest.approx(3020.0 / 16)
    assert item.chain_s == pytest.approx(60.0 * 32)  # ceil(1000 / 32) rounds
    assert item.wall_s == pytest.approx(1920.0)
    assert item.bound == "host chain"
    busy = model.project(1000, cpu, model.Fit(5.0, 2.5, 3), chain_s=1.0, forks=32, cores=16)
    assert busy.bound == "main process"
    few_cores = model.project(1000, cpu, model.Fit(0.0, 0.1, 3), chain_s=1.0, forks=32, cores=2)
    assert few_cores.bound == "CPU over the cores"
    assert few_cores.wall_s == pytest.approx(1510.0)


def _events():
    return [
        {"event": "play", "name": "Common"},
        {"event": "task", "name": "Install packages", "role": "common"},
        {"event": "start", "host": "ctl", "task": "Install packages", "t": 100.0},
        {"event": "start", "host": "c1", "task": "Install packages", "t": 100.0},
        {"event": "start", "host": "c2", "task": "Install packages", "t": 100.5},
        {"event": "ok", "host": "c1", "task": "Install packages", "changed": True, "t": 103.0},
        {"event": "ok", "host": "ctl", "task": "Install packages", "changed": True, "t": 110.0},
        {"event": "ok", "host": "c2", "task": "Install packages", "changed": False, "t": 102.5},
        {"event": "play", "name": "Slurmd"},
        {"event": "start", "host": "c1", "task": "slurmd : Start slurmd", "t": 200.0},
        {"event": "skipped", "host": "c1", "task": "Start slurmd", "t": 200.25},
        {"event": "start", "host": "c2", "task": "Start slurmd", "t": 200.0},
        {"event": "failed", "host": "c2", "task": "Start slurmd", "t": 201.0},
        {"event": "ok", "host": "c3", "task": "Start slurmd", "t": 201.0},  # no start: not timed
        {"event": "stats", "hosts": {}, "t": 202.0},
    ]


def test_the_profile_sums_host_seconds_per_play_and_task_of_compute_hosts(bench):
    profile = bench["profile"].aggregate(_events(), lambda host: host != "ctl")
    assert profile.plays == pytest.approx({"Common": 5.0, "Slurmd": 1.25})
    assert profile.other_seconds == pytest.approx(10.0)
    assert profile.compute_hosts == {"c1", "c2"}
    assert profile.per_compute_host() == pytest.approx(6.25 / 2)
    first, second = profile.top(10)
    assert (first.play, first.task, first.host_seconds, first.runs, first.changed) == (
        "Common", "Install packages", pytest.approx(5.0), 2, 1)
    assert (second.task, second.runs, second.skipped) == ("Start slurmd", 2, 1)
    assert len(profile.top(1)) == 1


def test_a_torn_last_line_of_the_event_log_is_left_out(bench, tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(json.dumps(event) for event in _events()[:3]) + '\n{"event": "ok", "ho')
    assert len(bench["profile"].read_events(log)) == 3


def _run(computes, first_cpu, full_cpu, short_cpu=1.0):
    def step(name, cpu, main, wall, changed):
        return {"step": name, "wall_s": wall, "cpu_user_s": cpu * 0.9, "cpu_sys_s": cpu * 0.1, "main_cpu_s": main,
                "returncode": 0, "changed": changed, "load": "1.00 1.00 1.00",
                "profile": {"compute_hosts": computes, "compute_host_seconds": 30.0 * computes,
                            "other_host_seconds": 50.0, "compute_results": 100 * computes,
                            "compute_skipped": 20 * computes, "plays": {"Common": 20.0 * computes, "Slurmd": 10.0 * computes},
                            "top": [{"play": "Common", "task": "Install", "host_seconds": 12.0 * computes,
                                     "runs": computes, "changed": computes, "skipped": 0}]}}

    return {"computes": computes, "hosts": computes + 1, "up_s": 30.0, "machine": "test machine",
            "settings": {"forks": "32", "strategy": "linear", "gathering": "explicit", "pipelining": "True",
                         "ssh_args": "-o ControlPersist=300s"},
            "steps": [step("first install", first_cpu, first_cpu / 2, 100.0 + computes, 140),
                      step("no-op (plan short path)", short_cpu, 0.0, 5.0, None),
                      step("no-op --full", full_cpu, full_cpu / 2, 50.0 + computes, 0)]}


def test_the_report_fits_each_deploy_and_projects_it(bench):
    report = bench["report"]
    runs = [_run(2, 30.0, 20.0), _run(4, 40.0, 24.0), _run(8, 60.0, 32.0)]
    fitted = report.fits(runs, "first install")
    assert fitted["cpu"].per_host == pytest.approx(5.0)
    assert fitted["cpu"].fixed == pytest.approx(20.0)
    assert fitted["main"].per_host == pytest.approx(2.5)
    assert report.chain_seconds(runs, "first install") == pytest.approx(30.0)
    projected = report.projections(runs, "first install", forks=32)
    assert [item.hosts for item in projected] == [1000, 10000]
    assert projected[0].cpu_s == pytest.approx(5020.0)
    text = report.section(runs)
    assert text.startswith(report.SECTION)
    assert "| first install | 20.0 | 5.00 | 5.00, 5.00 | 2.50 |" in text
    assert "<= 3: not met" in text
    assert "| no-op --full | 16.0 | 2.00 | 2.00, 2.00 |" in text
    assert report.marginal([_run(2, 30.0, 20.0), _run(4, 40.0, 24.0), _run(8, 80.0, 32.0)], "first install") == [
        pytest.approx(5.0), pytest.approx(10.0)]
    assert "| Install (Common) | 24.0 | 12.00 s | 2 / 0 of 2 |" in text  # the smallest run
    # 1,000 hosts: host chain 30 s x 32 rounds = 16 min; main 2.5 x 1000 + 10 = 2510 s
    assert ("- first install: 100 task results per compute host (20 of them skipped), 0.050 control-node CPU-s "
            "per host and task (0.30 s of a host's time).") in text
    assert "1,000-host first install, projected: 41.8 min (main process) against <= 20 min: not met." in text


def test_a_failed_step_is_left_out_of_the_fit(bench):
    report = bench["report"]
    runs = [_run(2, 30.0, 20.0), _run(4, 40.0, 24.0)]
    runs[1]["steps"][0]["returncode"] = 2
    assert report.fits(runs, "first install") is None
    assert report.fits(runs, "no-op --full") is not None


def test_the_inventory_is_the_bed_with_n_compute_hosts(bench):
    hosts = [{"name": "ctl", "address": "10.213.47.11", "key": "/var/lib/cluster-testbed/scale/id_ed25519",
              "ssh_common_args": "-o StrictHostKeyChecking=yes"}]
    hosts += [{"name": f"c{index}", "address": f"10.213.47.{11 + index}"} for index in (2, 3, 1)]
    cluster = load_cluster_text(bench["scale"].inventory_text("tbscale", hosts), "cluster.yaml")
    assert sorted(cluster.hosts) == ["c1", "c2", "c3", "ctl"]
    assert [node.name for node in cluster.nodes] == ["c1", "c2", "c3"]
    assert [node.address for node in cluster.nodes] == ["10.213.47.12", "10.213.47.13", "10.213.47.14"]
    assert cluster.inventory.training.torch_version is None


def test_compute_hosts_are_c_numbers_not_the_controller_nor_localhost(bench):
    is_compute = bench["scale"].is_compute
    assert [is_compute(host) for host in ("c1", "c12", "ctl", "localhost", "c1x")] == [True, True, False, False, False]
