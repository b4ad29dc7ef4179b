"""The alert rules cluster-cli renders (render/alert_rules.py), run by Prometheus' own promtool
(`promtool test rules`): each alert fires on the series that mean trouble, after its `for`, and
stays quiet on the ones that do not (an admin's drain, a node with its GPUs, a mounted share)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from unit_helpers import BASE, debian_program

from cluster_cli.loader import load_cluster_text
from cluster_cli.render.alert_rules import alert_rules, render_alert_rules

CACHE = Path(os.environ.get("CLUSTER_CLI_PROMTOOL_CACHE", "/var/cache/cluster-cli/promtool"))
INVENTORY = """\
cluster_name: alerts
hosts: [{name: ctl, connection: local}]
controllers: {primary: ctl}
accounting: {enabled: true, host: ctl}
node_groups: [{name: gpu, nodes: "gpu[1-2]", sockets: 1, cores_per_socket: 4, threads_per_core: 1,
               real_memory_mb: 4000, gpus: {count: 2, type: h100, autodetect: nvml}}]
partitions: [{name: gpu, nodes: [gpu], default: true}]
health_check: {mounts: [/shared]}
"""


PROMTOOL = debian_program("promtool", "prometheus", CACHE)
pytestmark = pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian's prometheus package)")


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "cluster-alerts.yml"
    path.write_text(render_alert_rules(load_cluster_text(INVENTORY, "alerts.yaml")))
    return path


def _test(rules: Path, tmp_path: Path, series: list[dict[str, str]], alerts: list[dict[str, object]]) -> None:
    test = {"rule_files": [str(rules)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": alerts}]}
    path = tmp_path / "test.yml"
    path.write_text(json.dumps(test))
    done = subprocess.run([str(PROMTOOL), "test", "rules", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _fires(name: str, at: str, labels: dict[str, str], severity: str, summary: str) -> dict[str, object]:
    return {"eval_time": at, "alertname": name, "exp_alerts": [_alert(labels, severity, summary)]}


def _alert(labels: dict[str, str], severity: str, summary: str) -> dict[str, object]:
    """An alert as promtool compares it: its labels and the summary people read."""
    return {"exp_labels": {**labels, "severity": severity}, "exp_annotations": {"summary": summary}}


def _quiet(name: str, at: str) -> dict[str, object]:
    return {"eval_time": at, "alertname": name, "exp_alerts": []}


def test_the_rules_are_valid(rules: Path) -> None:
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(rules)], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "SUCCESS: 11 rules found" in done.stdout, done.stdout + done.stderr


def test_slurmctld_down_fires_after_two_minutes(rules: Path, tmp_path: Path) -> None:
    _test(rules, tmp_path, [{"series": "cluster_slurm_up", "values": "1 0 0 0 0"}],
          [_quiet("SlurmctldDown", "2m"), _fires("SlurmctldDown", "4m", {}, "critical",
                                                       "slurmctld has not answered the Slurm exporter for 2 minutes")])


def test_slurmdbd_down_fires_where_accounting_runs(rules: Path, tmp_path: Path) -> None:
    _test(rules, tmp_path, [{"series": "cluster_slurm_slurmdbd_up", "values": "0x6"}],
          [_quiet("SlurmdbdDown", "4m"), _fires("SlurmdbdDown", "6m", {}, "critical",
                                                      "slurmdbd has not answered for 5 minutes: jobs are not recorded")])


def test_a_node_down_fires(rules: Path, tmp_path: Path) -> None:
    _test(rules, tmp_path, [
        {"series": 'cluster_slurm_nodes{partition="gpu",state="down+not_responding"}', "values": "1x6"},
        {"series": 'cluster_slurm_nodes{partition="gpu",state="idle"}', "values": "3x6"},
    ], [_fires("SlurmNodesDown", "6m", {"state": "down+not_responding"}, "critical", "1 node(s) down+not_responding")])


def test_a_drain_by_slurm_or_the_health_check_fires_and_an_admins_does_not(rules: Path, tmp_path: Path) -> None:
    _test(rules, tmp_path, [
        {"series": 'cluster_slurm_drained_nodes{reason="Kill task failed",by="slurm"}', "values": "1x3"},
        {"series": 'cluster_slurm_drained_nodes{reason="cluster-cli health: gpu 1 missing",by="root"}',
         "values": "1x3"},
        {"series": 'cluster_slurm_drained_nodes{reason="maintenance window",by="root"}', "values": "2x3"},
    ], [{"eval_time": "2m", "alertname": "SlurmNodesDrainedNotByAdmin", "exp_alerts": [
        _alert({"reason": "Kill task failed", "by": "slurm"}, "warning", "1 node(s) drained by slurm: Kill task failed"),
        _alert({"reason": "cluster-cli health: gpu 1 missing", "by": "root"}, "warning",
               "1 node(s) drained by root: cluster-cli health: gpu 1 missing"),
    ]}])


def test_nodes_allocated_with_no_job_fire_after_the_grace(rules: Path, tmp_path: Path) -> None:
    _test(rules, tmp_path, [{"series": "cluster_slurm_allocated_nodes_without_job", "values": "0 1 1 1 1"}],
          [_quiet("SlurmNodesAllocatedWithoutJob", "2m"), _fires("SlurmNodesAllocatedWithoutJob", "4m", {}, "warning",
                  "1 node(s) held allocated with no job: capacity nobody can use (docs/operations.md)")])


def test_a_node_with_fewer_gpus_than_the_inventory_fires(rules: Path, tmp_path: Path) -> None:
    series = [{"series": f'cluster_gpu_expected{{instance="{host}"}}', "values": "2x6"} for host in ("gpu1", "gpu2", "gpu3")]
    series += [{"series": f'cluster_gpu_info{{instance="gpu1",gpu="{n}"}}', "values": "1x6"} for n in (0, 1)]
    series += [{"series": 'cluster_gpu_info{instance="gpu2",gpu="0"}', "values": "1x6"}]  # one lost; gpu3 none
    _test(rules, tmp_path, series, [{"eval_time": "6m", "alertname": "GpusFewerThanInventory", "exp_alerts": [
        _alert({"instance": "gpu2"}, "critical", "gpu2 has fewer GPUs than its 2 of the inventory"),
        _alert({"instance": "gpu3"}, "critical", "gpu3 has fewer GPUs than its 2 of the inventory"),
    ]}])


def test_uncorrected_ecc_errors_fire_at_once_and_steady_counters_do_not(rules: Path, tmp_path: Path) -> None:
    _test(rules, tmp_path, [
        {"series": 'cluster_gpu_ecc_errors_total{instance="gpu1",gpu="0",type="uncorrected"}', "values": "0 0 1 1"},
        {"series": 'cluster_gpu_ecc_errors_total{instance="gpu1",gpu="1",type="uncorrected"}', "values": "4 4 4 4"},
    ], [{"eval_time": "3m", "alertname": "GpuUncorrectedEccErrors", "exp_alerts": [
        _alert({"instance": "gpu1", "gpu": "0", "type": "uncorrected"}, "critical",
               "gpu1 GPU 0: uncorrected ECC errors")]}])


def test_a_compute_host_without_the_shared_mount_fires(rules: Path, tmp_path: Path) -> None:
    _test(rules, tmp_path, [
        {"series": 'node_uname_info{instance="gpu1",cluster_role="compute"}', "values": "1x6"},
        {"series": 'node_uname_info{instance="gpu2",cluster_role="compute"}', "values": "1x6"},
        {"series": 'node_uname_info{instance="ctl",cluster_role="controller"}', "values": "1x6"},
        {"series": 'node_filesystem_size_bytes{instance="gpu1",mountpoint="/shared"}', "values": "1e12x6"},
    ], [_fires("SharedMountMissing", "6m", {"instance": "gpu2"}, "critical", "gpu2 has no /shared mounted")])


def test_a_host_without_a_shared_mount_it_should_have_fires_and_hosts_that_do_not_mount_it_stay_quiet(
    tmp_path: Path,
) -> None:
    """storage.mounts: /data on the gpu group's hosts only, selected by their scrape targets."""
    text = INVENTORY.replace("health_check: {mounts: [/shared]}\n", "")
    text += "storage:\n  mounts:\n    - {source: 'fs1:/export/data', path: /data, hosts: [gpu]}\n"
    rules = tmp_path / "rules.yml"
    rules.write_text(render_alert_rules(load_cluster_text(text, "alerts.yaml")))
    _test(rules, tmp_path, [
        {"series": 'node_uname_info{instance="gpu1:9100",cluster_role="compute"}', "values": "1x6"},
        {"series": 'node_uname_info{instance="gpu2:9100",cluster_role="compute"}', "values": "1x6"},
        {"series": 'node_uname_info{instance="ctl:9100",cluster_role="controller"}', "values": "1x6"},
        {"series": 'node_filesystem_size_bytes{instance="gpu1:9100",mountpoint="/data"}', "values": "1e12x6"},
    ], [_fires("SharedMountMissing", "6m", {"instance": "gpu2:9100"}, "critical", "gpu2:9100 has no /data mounted")])


def test_a_file_system_almost_full_fires(rules: Path, tmp_path: Path) -> None:
    labels = 'instance="gpu1",mountpoint="/",fstype="ext4"'
    _test(rules, tmp_path, [
        {"series": f"node_filesystem_avail_bytes{{{labels}}}", "values": "1x12"},
        {"series": f"node_filesystem_size_bytes{{{labels}}}", "values": "100x12"},
        {"series": f"node_filesystem_readonly{{{labels}}}", "values": "0x12"},
    ], [_fires("FilesystemAlmostFull", "11m", {"instance": "gpu1", "mountpoint": "/", "fstype": "ext4"},
                   "warning", "gpu1 /: under 5 % free")])


def test_without_accounting_or_mounts_their_rules_are_left_out() -> None:
    text = INVENTORY.replace("accounting: {enabled: true, host: ctl}", "accounting: {enabled: false}")
    text = text.replace("health_check: {mounts: [/shared]}\n", "")
    names = [rule["alert"] for rule in alert_rules(load_cluster_text(text, "a.yaml"))["groups"][0]["rules"]]
    assert "SlurmdbdDown" not in names and "SharedMountMissing" not in names and "SlurmctldDown" in names


def test_the_inventory_shortens_a_window_and_the_alert_fires_after_it(tmp_path: Path) -> None:
    """monitoring.alert_for: a test bed's short Slurm timeouts want short windows."""
    text = INVENTORY + "monitoring: {host: ctl, alert_for: {SlurmNodesDown: 1m, SlurmctldDown: 1h30m}}\n"
    cluster = load_cluster_text(text, "alerts.yaml")
    windows = {rule["alert"]: rule["for"] for rule in alert_rules(cluster)["groups"][0]["rules"]}
    assert (windows["SlurmNodesDown"], windows["SlurmctldDown"], windows["SlurmdbdDown"]) == ("1m", "1h30m", "5m")
    short = tmp_path / "cluster-alerts.yml"
    short.write_text(render_alert_rules(cluster))
    _test(short, tmp_path, [{"series": 'cluster_slurm_nodes{partition="gpu",state="down"}', "values": "1x3"}],
          [_quiet("SlurmNodesDown", "0m"), _fires("SlurmNodesDown", "2m", {"state": "down"}, "critical", "1 node(s) down")])


def test_a_shared_mounts_hosts_are_matched_by_their_targets_with_the_dots_escaped(tmp_path: Path) -> None:
    text = BASE + "storage:\n  mounts:\n    - {source: 'fs1:/export/data', path: /data, hosts: [gpu]}\n"
    rendered = render_alert_rules(load_cluster_text(text, "alerts.yaml"))
    [expr] = [rule["expr"] for rule in json.loads(rendered)["groups"][0]["rules"] if rule["alert"] == "SharedMountMissing"]
    assert 'node_uname_info{instance=~"10\\\\.0\\\\.1\\\\.1:9100|10\\\\.0\\\\.1\\\\.2:9100|' in expr, expr
    rules = tmp_path / "rules.yml"
    rules.write_text(rendered)
    _test(rules, tmp_path, [
        {"series": 'node_uname_info{instance="10.0.1.1:9100",cluster_role="compute"}', "values": "1x6"},
        {"series": 'node_uname_info{instance="10x0.1.1:9100",cluster_role="compute"}', "values": "1x6"},
    ], [_fires("SharedMountMissing", "6m", {"instance": "10.0.1.1:9100"}, "critical", "10.0.1.1:9100 has no /data mounted")])
