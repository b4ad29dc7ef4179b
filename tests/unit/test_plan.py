"""`plan`'s comparison: rendered files and inventory against what the hosts answered.

The host answers are built here as the probe agent writes them (tests/unit/test_probe_agent.py
runs the agent itself); what is tested is the plan's reading of them. tests/deploy proves the
whole path on real daemons.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from unit_helpers import local_cluster

from cluster_cli.deploy import batch_vars
from cluster_cli.render.ansible_inventory import host_reach, render_retired_inventory
from cluster_cli.render.health_conf import host_health_path, with_host_health_texts
from cluster_cli.deployed import DeployedRecord, load_record
from cluster_cli.errors import ExitCode
from cluster_cli.host_files import files_by_host
from cluster_cli.loader import load_cluster
from cluster_cli.people_accounts import document_checksum, people_document
from cluster_cli.plan import Impact, make_plan, masked
from cluster_cli.probe import HostProbe
from cluster_cli.render import render_configs

REPO = Path(__file__).resolve().parents[2]
MUNGE_KEY = b"k" * 1024
VERSION = "22.05.8-4+deb12u3"


def _rendered(cluster) -> dict[str, str]:
    files = render_configs(cluster, "db-password-123")
    return with_host_health_texts({item.path: item.content for item in files}, cluster)


def _converged_probe(cluster, rendered) -> HostProbe:
    """What the single local host answers when it holds exactly what ``cluster`` renders."""
    files = files_by_host(cluster, rendered, MUNGE_KEY)["localhost"]
    answers = {item.path: ({"sha256": item.sha256} if item.sha256 else {"absent": True}) for item in files}
    daemons = {"slurmctld": {"pid": 10, "started": 1.0, "running": True},
               "slurmdbd": {"pid": 11, "started": 1.0, "running": True}}
    daemons |= {f"slurmd@{node.name}": {"pid": 20, "started": 1.0, "running": True} for node in cluster.nodes}
    packages = {name: VERSION for name in ("slurm-client", "slurmctld", "slurmd", "slurmdbd")} | {"munge": "0.5.15"}
    packages |= {"prometheus-node-exporter": "1.5.0-1+b6", "prometheus": "2.42.0+ds-5+deb12u1"}
    packages |= {"libpmix-dev": "4.2.2-1+deb12u1", "openmpi-bin": "4.1.4-3+b1"}
    packages |= {"runc": "1.1.5+ds1-1+deb12u1"}
    controller = {"state_cluster_name": cluster.name, "error": None, "jobs": [],
                  "nodes": [{"name": node.name, "state": "idle", "reason": "none", "user": "Unknown", "time": "Unknown"}
                            for node in cluster.nodes]}
    return HostProbe("localhost", answers, daemons, packages, controller)


def _people_given(record: DeployedRecord, cluster) -> DeployedRecord:
    """``record`` as a deploy of ``cluster`` leaves it: the host was given the inventory's people."""
    document = people_document(cluster.inventory)
    record.remember_people(document, document_checksum(document), ["localhost"])
    return record


def _plan(cluster, rendered, probe, record=None):
    files = files_by_host(cluster, rendered, MUNGE_KEY)
    return make_plan(cluster, files, rendered, {"localhost": probe},
                     _people_given(record or DeployedRecord(), cluster))


def _host_holds(probe: HostProbe, path: str, text: str) -> None:
    probe.files[path] = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "text": text}


def test_a_converged_cluster_has_no_change_and_exit_0(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    plan = _plan(cluster, rendered, _converged_probe(cluster, rendered))
    assert plan.changes == [] and plan.exit_code is ExitCode.OK
    # a host the record does not say was given the people: they are made there
    files = files_by_host(cluster, rendered, MUNGE_KEY)
    unknown = make_plan(cluster, files, rendered, {"localhost": _converged_probe(cluster, rendered)}, DeployedRecord())
    assert [(change.subject, change.impact) for change in unknown.changes] == [("people", Impact.PEOPLE)]


def test_the_login_host_holds_every_job_template_and_a_changed_one_is_a_file_change(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    held = {item.path: item.source for item in files_by_host(cluster, rendered, MUNGE_KEY)["localhost"]}
    examples = {path: source for path, source in held.items() if source.startswith("examples/")}
    assert examples == {f"/opt/cluster-training/examples/{source[9:]}": source
                        for source in rendered if source.startswith("examples/")}
    assert {"/opt/cluster-training/examples/ddp.sbatch", "/opt/cluster-training/examples/using-the-cluster.md"} <= set(examples)
    probe = _converged_probe(cluster, rendered)
    assert _plan(cluster, rendered, probe).changes == []
    _host_holds(probe, "/opt/cluster-training/examples/ddp.sbatch", "#!/bin/bash\n# an older template\n")
    changes = [(change.subject, change.impact) for change in _plan(cluster, rendered, probe).changes]
    assert changes == [("/opt/cluster-training/examples/ddp.sbatch", Impact.FILE)]


def test_a_partition_change_is_a_reconfigure_and_restarts_nothing(tmp_path: Path) -> None:
    old = local_cluster(tmp_path)
    new = local_cluster(tmp_path, lambda text: text.replace('max_time: "01:00:00"', 'max_time: "02:00:00"'))
    probe = _converged_probe(old, _rendered(old))
    _host_holds(probe, "/etc/slurm/slurm.conf", _rendered(old)["slurm/slurm.conf"])
    plan = _plan(new, _rendered(new), probe)
    impacts = {(change.subject, change.impact) for change in plan.changes}
    # the job templates' README lists each partition's time limit: the login host's copy is replaced
    assert impacts == {("/etc/slurm/slurm.conf", Impact.FILE), ("slurmctld", Impact.RECONFIGURE),
                       ("/opt/cluster-training/examples/README.md", Impact.FILE)}
    assert plan.exit_code is ExitCode.CHANGES
    diff = next(change.diff for change in plan.changes if change.subject == "/etc/slurm/slurm.conf")
    assert "-PartitionName=debug" in diff and "MaxTime=02:00:00" in diff


def test_a_node_memory_change_restarts_slurmctld_and_every_slurmd(tmp_path: Path) -> None:
    old = local_cluster(tmp_path)
    new = local_cluster(tmp_path, lambda text: text.replace("real_memory_mb: 3072", "real_memory_mb: 2048"))
    probe = _converged_probe(old, _rendered(old))
    _host_holds(probe, "/etc/slurm/slurm.conf", _rendered(old)["slurm/slurm.conf"])
    restarts = {change.subject for change in _plan(new, _rendered(new), probe).changes
                if change.impact in (Impact.RESTART_SLURMCTLD, Impact.RESTART_SLURMD)}
    assert restarts == {"slurmctld", "slurmd@node1", "slurmd@node2", "slurmd@node3"}


def test_a_cluster_deployed_before_the_memory_defaults_and_gpu_types_restarts_slurmctld(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    new = rendered["slurm/slurm.conf"]
    old = new.replace("AccountingStorageTRES=gres/gpu,gres/gpu:fake\n", "AccountingStorageTRES=gres/gpu\n")
    old = old.replace("DefMemPerCPU=1536\n", "").replace(" DefMemPerGPU=3072", "")
    assert "DefMem" not in old and old.count("\n") == new.count("\n") - 1
    probe = _converged_probe(cluster, rendered)
    _host_holds(probe, "/etc/slurm/slurm.conf", old)
    changes = _plan(cluster, rendered, probe).changes
    restarts = {change.subject for change in changes
                if change.impact in (Impact.RESTART_SLURMCTLD, Impact.RESTART_SLURMD)}
    # slurm.conf(5): new TRES are set up when slurmctld starts; the DefMem keys alone would reconfigure
    assert restarts == {"slurmctld", "slurmd@node1", "slurmd@node2", "slurmd@node3"}
    details = " ".join(change.detail for change in changes)
    assert "AccountingStorageTRES changed: restart slurmctld" in details
    assert "DefMemPerCPU changed: scontrol reconfigure" in details
    assert "PartitionName debug changed (DefMemPerGPU)" in details


def test_a_hand_edit_since_the_last_deploy_is_drift(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    record = DeployedRecord(tmp_path / "deployed.json")
    record.update(files_by_host(cluster, rendered, MUNGE_KEY), ["localhost"])
    probe = _converged_probe(cluster, rendered)
    edited = rendered["slurm/slurm.conf"].replace("SlurmctldDebug=info", "SlurmctldDebug=debug2")
    _host_holds(probe, "/etc/slurm/slurm.conf", edited)
    plan = _plan(cluster, rendered, probe, record)
    drift = plan.by_impact(Impact.DRIFT)
    assert [change.subject for change in drift] == ["/etc/slurm/slurm.conf"]
    assert "-SlurmctldDebug=debug2" in drift[0].diff
    # without a record of the last deploy the same difference cannot be called drift
    assert not _plan(cluster, rendered, probe).by_impact(Impact.DRIFT)


def test_a_secret_file_is_compared_by_checksum_and_never_diffed(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    probe.files["/etc/munge/munge.key"] = {"sha256": "0" * 64}
    probe.files["/etc/slurm/slurmdbd.conf"] = {"sha256": "1" * 64}
    plan = _plan(cluster, rendered, probe)
    secret_changes = [change for change in plan.changes if change.subject.endswith(("munge.key", "slurmdbd.conf"))]
    assert len(secret_changes) == 2 and all(change.diff == "" for change in secret_changes)
    assert any(change.impact is Impact.RESTART_SLURMDBD for change in plan.changes)


def test_diffs_mask_secret_values() -> None:
    assert masked("StoragePass=hunter2\nStorageUser=slurm") == "StoragePass=********\nStorageUser=slurm"


def test_nodes_added_and_removed_come_from_what_slurmctld_knows(tmp_path: Path) -> None:
    old = local_cluster(tmp_path)
    probe = _converged_probe(old, _rendered(old))
    probe.controller["nodes"].append({"name": "node9", "state": "allocated", "reason": "none",
                                      "user": "Unknown", "time": "Unknown"})
    probe.controller["jobs"] = [{"id": "42", "state": "RUNNING", "user": "smoke", "nodes": "node[3,9]"}]
    probe.controller["nodes"] = [node for node in probe.controller["nodes"] if node["name"] != "node1"]
    del probe.daemons["slurmd@node1"]
    plan = _plan(old, _rendered(old), probe)
    assert [(c.subject, c.impact) for c in plan.changes if c.impact in (Impact.NODE_ADD, Impact.NODE_REMOVE)] == [
        ("node1", Impact.NODE_ADD), ("node9", Impact.NODE_REMOVE)]
    assert "running jobs 42" in plan.by_impact(Impact.NODE_REMOVE)[0].detail


def test_a_daemon_that_does_not_run_is_started(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    probe.daemons["slurmd@node2"] = {"pid": None, "started": None, "running": False}
    assert [(c.subject, c.impact) for c in _plan(cluster, rendered, probe).changes] == [("slurmd@node2", Impact.START)]


def test_a_host_holding_another_clusters_state_is_a_conflict(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    probe.controller["state_cluster_name"] = "other"
    plan = _plan(cluster, rendered, probe)
    assert plan.exit_code is ExitCode.FAILURE
    assert "cluster 'other'" in plan.conflicts[0] and "CLUSTER NAME MISMATCH" in plan.conflicts[0]


def test_the_cluster_id_slurm_24_11_keeps_beside_the_name_is_no_conflict(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    probe.controller["state_cluster_name"] = f"{cluster.name}|600"
    assert _plan(cluster, rendered, probe).conflicts == []
    probe.controller["state_cluster_name"] = "other|600"
    assert "cluster 'other'" in _plan(cluster, rendered, probe).conflicts[0]


def test_an_unprobed_host_fails_the_plan_with_its_reason(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    plan = _plan(cluster, _rendered(cluster), HostProbe("localhost", error="ssh: connection refused"))
    assert plan.exit_code is ExitCode.FAILURE and plan.unreachable == {"localhost": "ssh: connection refused"}


@pytest.mark.parametrize("pin", ["22.05.8-4+deb12u3", "24.11.5-1"])
def test_a_pinned_version_that_differs_is_a_package_change(tmp_path: Path, pin: str) -> None:
    cluster = local_cluster(tmp_path, lambda text: text.replace("slurm:\n", f"slurm:\n  version: \"{pin}\"\n", 1))
    rendered = _rendered(cluster)
    packages = [c.subject for c in _plan(cluster, rendered, _converged_probe(cluster, rendered)).changes
                if c.impact is Impact.PACKAGE]
    assert packages == ([] if pin == VERSION else ["slurm-client", "slurmctld", "slurmd", "slurmdbd"])


def test_the_deployed_record_survives_a_round_trip(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    record = DeployedRecord(tmp_path / "deployed.json")
    record.update(files_by_host(cluster, _rendered(cluster), MUNGE_KEY), ["localhost"])
    record.save()
    again = load_record(tmp_path)
    assert again.hosts == record.hosts and again.knows("localhost", "/etc/slurm/slurm.conf")
    assert MUNGE_KEY.decode() not in (tmp_path / "deployed.json").read_text()


def test_the_probe_looks_for_owed_actions_where_the_roles_leave_them() -> None:
    from cluster_cli.host_files import PENDING_DIR

    defaults = (REPO / "roles" / "slurm_common" / "defaults" / "main.yml").read_text()
    assert f"slurm_common_pending_dir: {PENDING_DIR}\n" in defaults


def test_owed_actions_and_stray_slurmds_are_changes(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    probe.owed.append("restart-slurmd")
    probe.slurmds.update(probe.daemons | {"slurmd@node7": {"pid": 99, "started": 1.0, "running": True}})
    found = [(change.subject, change.impact) for change in _plan(cluster, rendered, probe).changes]
    assert found == [("restart-slurmd", Impact.RESTART_SLURMD), ("slurmd@node7", Impact.STOP)]


def test_configless_compute_hosts_hold_no_slurm_config_and_the_others_do(tmp_path: Path) -> None:
    text = (REPO / "inventories" / "examples" / "minimal.yaml").read_text()
    (tmp_path / "inventory.yaml").write_text(text.replace("partitions:", "slurm:\n  configless: true\n\npartitions:", 1))
    cluster = load_cluster(tmp_path / "inventory.yaml")
    rendered = _rendered(cluster)
    wanted = {name: {item.name for item in files if item.sha256}
              for name, files in files_by_host(cluster, rendered, MUNGE_KEY).items()}
    # no Slurm file; the health check's expectations and program are cluster-cli's own files
    assert wanted["gpu01"] == {"munge.key", "cluster-cli-health.json", "cluster-cli-health"}
    assert {"slurm.conf", "gres.conf", "cgroup.conf", "slurmdbd.conf"} <= wanted["head"]
    roles_vars = (REPO / "roles" / "slurm_common" / "vars" / "main.yml").read_text()
    assert "__slurm_common_file_groups: [slurm_controller, slurm_login, slurm_database]" in roles_vars


def test_a_slurm_version_without_rules_gets_the_same_fallback_as_the_roles(tmp_path: Path) -> None:
    # 23.11 has no data here: plan applies the oldest series' rules and says so, like slurm_conf_change
    old = local_cluster(tmp_path)
    new = local_cluster(tmp_path, lambda text: text.replace("real_memory_mb: 3072", "real_memory_mb: 2048"))
    probe = _converged_probe(old, _rendered(old))
    probe.packages["slurm-client"] = "23.11.4-1"
    _host_holds(probe, "/etc/slurm/slurm.conf", _rendered(old)["slurm/slurm.conf"])
    restart = _plan(new, _rendered(new), probe).by_impact(Impact.RESTART_SLURMCTLD)
    assert len(restart) == 1 and "23.11.4-1 has no rules here" in restart[0].detail


@pytest.mark.parametrize(("batch", "serial", "per_host"),
                         [(1, 1, 1), (2, 1, 2), (3, 1, 3), (5, 1, 3), (7, 2, 3)])
def test_deploy_batch_never_restarts_more_slurmd_at_once_than_asked_on_the_local_cluster(
        tmp_path: Path, batch: int, serial: int, per_host: int) -> None:
    cluster = local_cluster(tmp_path)  # one host with three slurmd instances
    rollout = batch_vars(cluster, batch)
    assert rollout == {"deploy_slurmd_serial": serial, "slurmd_restart_batch": per_host}
    assert rollout["deploy_slurmd_serial"] * rollout["slurmd_restart_batch"] <= max(batch, 1)


@pytest.mark.parametrize("batch", [1, 8, 50])
def test_deploy_batch_is_hosts_at_a_time_with_one_node_per_host(batch: int) -> None:
    cluster = load_cluster(REPO / "inventories" / "examples" / "gpu-cluster.yaml")
    assert {len(host.slurmd_nodes) for host in cluster.hosts.values() if host.slurmd_nodes} == {1}
    assert batch_vars(cluster, batch) == {"deploy_slurmd_serial": batch, "slurmd_restart_batch": 1}



def _gpu_clusters(tmp_path: Path):
    """The shipped GPU example, and the same with cpu08 (host and node) taken out."""
    text = (REPO / "inventories" / "examples" / "gpu-cluster.yaml").read_text()
    smaller = text.replace("nodes: cpu[01-08]", "nodes: cpu[01-07]").replace("10.10.3.[1-8]", "10.10.3.[1-7]")
    assert smaller != text
    (tmp_path / "full.yaml").write_text(text)
    (tmp_path / "smaller.yaml").write_text(smaller)
    return load_cluster(tmp_path / "full.yaml"), load_cluster(tmp_path / "smaller.yaml")


def test_a_host_that_left_the_inventory_is_remembered_and_its_slurmd_stopped(tmp_path: Path) -> None:
    full, smaller = _gpu_clusters(tmp_path)
    record = DeployedRecord(tmp_path / "deployed.json")
    record.remember_reach(host_reach(full))
    record.save()
    again = load_record(tmp_path)
    assert again.reach["cpu08"]["slurmd_nodes"] == ["cpu08"]
    connection = again.reach["cpu08"]["connection"]
    assert (connection["ansible_host"], connection["ansible_port"]) == ("10.10.3.8", 22)
    assert connection["ansible_ssh_private_key_file"].endswith("/.ssh/atlas_ed25519")  # a path, never a key
    assert list(again.retired(smaller.hosts)) == ["cpu08"]
    assert again.retired(full.hosts) == {}
    plan = make_plan(smaller, {}, {}, {}, again)
    assert [(c.host, c.subject, c.impact) for c in plan.changes] == [("cpu08", "slurmd@cpu08", Impact.STOP)]
    inventory = json.loads(render_retired_inventory(smaller, again.retired(smaller.hosts)).split("\n", 1)[1])
    assert inventory == {"all": {"children": {"slurm_retired": {"hosts": {
        "cpu08": {**again.reach["cpu08"]["connection"], "slurmd_nodes": [],
                  "slurmd_teardown_instances": ["cpu08"]}}}}}}
    again.forget(["cpu08"])
    assert again.retired(smaller.hosts) == {} and "cpu08" not in again.reach


def test_a_host_without_slurmd_is_not_retired(tmp_path: Path) -> None:
    full, _ = _gpu_clusters(tmp_path)
    record = DeployedRecord()
    record.remember_reach(host_reach(full))
    assert record.retired([name for name in full.hosts if name != "login1"]) == {}


def test_compute_hosts_hold_the_health_check_file_and_lose_it_when_the_check_is_off(tmp_path: Path) -> None:
    text = (REPO / "inventories" / "examples" / "minimal.yaml").read_text()
    for enabled in (True, False):
        (tmp_path / "inventory.yaml").write_text(f"{text}\nhealth_check:\n  enabled: {str(enabled).lower()}\n")
        cluster = load_cluster(tmp_path / "inventory.yaml")
        files = files_by_host(cluster, _rendered(cluster), MUNGE_KEY)
        health = {name: [item for item in found if item.path == "/etc/cluster-cli-health.json"]
                  for name, found in files.items()}
        assert not health["head"], "a host without slurmd gets no health check"
        assert [item.source for item in health["gpu01"]] == [host_health_path("gpu01")]
        assert (health["gpu01"][0].sha256 is not None) is enabled


def test_the_monitoring_packages_and_files_missing_are_changes_of_the_plan(tmp_path: Path) -> None:
    # the local inventory has monitoring.host: localhost (roles/node_exporter, slurm_exporter, prometheus)
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    del probe.packages["prometheus"]
    probe.files["/etc/prometheus/prometheus.yml"] = {"sha256": "0" * 64, "text": "{}\n"}
    changes = {(change.subject, change.impact) for change in _plan(cluster, rendered, probe).changes}
    assert ("prometheus", Impact.PACKAGE) in changes
    assert any(subject.endswith("prometheus.yml") and impact is not Impact.PACKAGE for subject, impact in changes), changes


def test_the_mpi_packages_missing_on_a_compute_and_login_host_are_package_changes(tmp_path: Path) -> None:
    # the local inventory has mpi.enabled: true, and its one host is a compute and a login host
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    del probe.packages["openmpi-bin"]
    changes = [(change.subject, change.impact, change.detail) for change in _plan(cluster, rendered, probe).changes]
    assert changes == [("openmpi-bin", Impact.PACKAGE, "not installed: install")]
    (tmp_path / "off").mkdir()
    without = local_cluster(tmp_path / "off", lambda text: text.replace("mpi:\n  enabled: true\n", "mpi:\n  enabled: false\n"))
    rendered = _rendered(without)
    probe = _converged_probe(without, rendered)
    del probe.packages["openmpi-bin"], probe.packages["libpmix-dev"]
    assert _plan(without, rendered, probe).changes == []


def test_the_container_runtime_missing_on_a_compute_and_login_host_is_a_package_change(tmp_path: Path) -> None:
    # the local inventory has containers.enabled: true, and its one host is a compute and a login host
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    del probe.packages["runc"]
    changes = [(change.subject, change.impact, change.detail) for change in _plan(cluster, rendered, probe).changes]
    assert changes == [("runc", Impact.PACKAGE, "not installed: install")]
    (tmp_path / "off").mkdir()
    without = local_cluster(tmp_path / "off", lambda text: text.replace("containers:\n  enabled: true\n",
                                                                        "containers:\n  enabled: false\n"))
    rendered = _rendered(without)
    assert "slurm/oci.conf" not in rendered
    probe = _converged_probe(without, rendered)
    del probe.packages["runc"]
    assert _plan(without, rendered, probe).changes == []


def test_a_container_image_the_compute_hosts_lack_is_a_note_at_its_line(tmp_path: Path) -> None:
    """Not a refusal: the image is made from the environment a deploy installs, after the first one."""
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    image = cluster.inventory.containers.image
    text = (tmp_path / "inventory.yaml").read_text().splitlines()
    line = next(number for number, row in enumerate(text, 1) if row.strip() == f"image: {image}")
    probe = _converged_probe(cluster, rendered)
    plan = _plan(cluster, rendered, dataclasses.replace(probe, images={image: False}))
    assert plan.notes == [
        f"{tmp_path / 'inventory.yaml'}:{line}: containers.image {image} is not a root filesystem (no bin/) on "
        "localhost: container jobs and the smoke check `container` need it there; make it with "
        "training/container_image.py (docs/containers.md)"
    ]
    assert plan.changes == [] and plan.exit_code is ExitCode.OK
    for held in ({image: True}, {}):  # there; or a host whose agent was not asked
        assert _plan(cluster, rendered, dataclasses.replace(probe, images=held)).notes == []


def test_a_changed_program_of_roles_slurmd_is_a_file_change_and_one_turned_off_is_removed(tmp_path: Path) -> None:
    """The container start and the health check are the role's files: a host that holds an older
    one is a change (the plan's short path would otherwise never bring a new release's program)."""
    cluster = local_cluster(tmp_path)
    rendered = _rendered(cluster)
    probe = _converged_probe(cluster, rendered)
    assert _plan(cluster, rendered, probe).changes == []
    _host_holds(probe, "/usr/local/bin/cluster-cli-oci-run", "#!/usr/bin/python3\n# an older release\n")
    changes = _plan(cluster, rendered, probe).changes
    assert [(change.host, change.subject) for change in changes] == [("localhost", "/usr/local/bin/cluster-cli-oci-run")]
    off = local_cluster(tmp_path, lambda text: text.replace("containers:\n  enabled: true", "containers:\n  enabled: false"))
    held = {item.path: item.sha256 for item in files_by_host(off, _rendered(off), MUNGE_KEY)["localhost"]}
    assert held["/usr/local/bin/cluster-cli-oci-run"] is None  # to be removed
