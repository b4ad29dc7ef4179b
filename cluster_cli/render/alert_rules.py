"""Prometheus alert rules for the cluster's metrics (docs/monitoring.md#alert-rules), rendered from
the inventory where a rule needs its facts: SlurmUser (whose drains are Slurm's own), whether
slurmdbd runs, the mounts every compute host must have (and each shared mount, its hosts), the `for` windows (alert_windows). The metrics are the two exporters'
(cluster_cli/exporters) and node_exporter's; compute hosts are scraped with the target label
``cluster_role="compute"``. Tested with ``promtool test rules`` (tests/unit/test_alert_rules.py)."""

from __future__ import annotations

from typing import Any

from cluster_cli.alert_windows import window
from cluster_cli.cluster import Cluster
from cluster_cli.render.common import json_text
from cluster_cli.shared_storage import mounts_by_host

#: The health check's drain reasons start so (roles/health_check): never an admin's.
HEALTH_REASON = "cluster-cli health:"


def _rule(name: str, expr: str, windows: dict[str, str], severity: str, summary: str) -> dict[str, Any]:
    return {"alert": name, "expr": expr, "for": window(name, windows), "labels": {"severity": severity},
            "annotations": {"summary": summary}}


def _spoken(duration: str) -> str:
    """``2m`` as "2 minutes" in a summary; a compound duration (``1h30m``) as it is."""
    units = {"s": "second", "m": "minute", "h": "hour", "d": "day"}
    number, unit = duration[:-1], duration[-1:]
    if not number.isdigit() or unit not in units:
        return duration
    return f"{number} {units[unit]}{'' if number == '1' else 's'}"


def alert_rules(cluster: Cluster) -> dict[str, Any]:
    inventory = cluster.inventory
    windows = inventory.monitoring.alert_for
    rules = [
        _rule("SlurmctldDown", "cluster_slurm_up == 0", windows, "critical",
              f"slurmctld has not answered the Slurm exporter for {_spoken(window('SlurmctldDown', windows))}"),
        _rule("SlurmMetricsMissing", "absent(cluster_slurm_up)", windows, "warning",
              "no Slurm exporter is scraped: nothing else here can fire for Slurm"),
        _rule("SlurmNodesDown", 'sum by (state) (cluster_slurm_nodes{state=~"down.*|fail.*|.*not_responding"}) > 0',
              windows, "critical", "{{ $value }} node(s) {{ $labels.state }}"),
        _rule("SlurmNodesDrainedNotByAdmin",
              f'sum by (reason, by) (cluster_slurm_drained_nodes{{by="{inventory.slurm.user}"}} or '
              f'cluster_slurm_drained_nodes{{reason=~"{HEALTH_REASON}.*"}}) > 0',
              windows, "warning", "{{ $value }} node(s) drained by {{ $labels.by }}: {{ $labels.reason }}"),
        _rule("SlurmNodesAllocatedWithoutJob", "cluster_slurm_allocated_nodes_without_job > 0", windows, "warning",
              "{{ $value }} node(s) held allocated with no job: capacity nobody can use (docs/operations.md)"),
        _rule("GpusFewerThanInventory",
              "cluster_gpu_expected > on(instance) (count by (instance) (cluster_gpu_info) "
              "or on(instance) cluster_gpu_expected * 0)",
              windows, "critical", "{{ $labels.instance }} has fewer GPUs than its {{ $value }} of the inventory"),
        _rule("GpuUncorrectedEccErrors", 'increase(cluster_gpu_ecc_errors_total{type="uncorrected"}[15m]) > 0',
              windows, "critical", "{{ $labels.instance }} GPU {{ $labels.gpu }}: uncorrected ECC errors"),
        _rule("GpuCorrectedEccErrorsRising", 'increase(cluster_gpu_ecc_errors_total{type="corrected"}[1h]) > 100',
              windows, "warning", "{{ $labels.instance }} GPU {{ $labels.gpu }}: corrected ECC errors rising"),
        _rule("FilesystemAlmostFull",
              'node_filesystem_avail_bytes{fstype!~"tmpfs|ramfs|overlay|squashfs"} '
              "/ node_filesystem_size_bytes < 0.05 and node_filesystem_readonly == 0",
              windows, "warning", "{{ $labels.instance }} {{ $labels.mountpoint }}: under 5 % free"),
    ]
    if inventory.accounting.enabled:
        rules.insert(1, _rule("SlurmdbdDown", "cluster_slurm_slurmdbd_up == 0", windows, "critical",
                              f"slurmdbd has not answered for {_spoken(window('SlurmdbdDown', windows))}: jobs are not recorded"))
    rules += [_rule(
        "SharedMountMissing",
        f'count by (instance) (node_uname_info{{{selector}}}) unless on(instance) '
        f'count by (instance) (node_filesystem_size_bytes{{mountpoint="{mount}"}})',
        windows, "critical", f"{{{{ $labels.instance }}}} has no {mount} mounted",
    ) for mount, selector in _mount_selectors(cluster).items()]
    return {"groups": [{"name": f"cluster-cli-{cluster.name}", "rules": rules}]}


def _mount_selectors(cluster: Cluster) -> dict[str, str]:
    """Each mount path and the node_exporter series of the hosts that must have it: every compute
    host for health_check.mounts; for a storage.mounts path, the hosts that mount it, by their
    scrape targets (a regular expression of them, its dots escaped for PromQL's string and RE2)."""
    selectors = {mount: 'cluster_role="compute"' for mount in cluster.inventory.health_check.mounts}
    storage = cluster.inventory.storage
    if storage is None:
        return selectors
    port = cluster.inventory.monitoring.ports.node
    by_host = mounts_by_host(cluster.inventory, cluster.hosts)
    for index, mount in enumerate(storage.mounts):
        targets = [f"{cluster.hosts[name].address}:{port}" for name, indexes in by_host.items() if index in indexes]
        if mount.path not in selectors and targets:
            selectors[mount.path] = 'instance=~"' + "|".join(target.replace(".", "\\\\.") for target in targets) + '"'
    return selectors


def render_alert_rules(cluster: Cluster) -> str:
    """The rule file: JSON, which Prometheus reads as the YAML it is."""
    return json_text(alert_rules(cluster)) + "\n"
