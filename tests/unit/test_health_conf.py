"""The health check's side of the inventory: the HealthCheck* keys of slurm.conf, the cluster's
expectations document and each compute host's file made from it (render/health_conf.py,
health_expectations.py), the role variables, and what the inventory refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from unit_helpers import REPO, SHIPPED_INVENTORIES, load, problems

from cluster_cli.ansible.variables import cluster_variables
from cluster_cli.cluster import Cluster
from cluster_cli.health_expectations import HostHealthTexts, UnknownNode, host_health_config
from cluster_cli.render.health_conf import (
    HEALTH_BUILD_DIR,
    HEALTH_DOCUMENT,
    HEALTH_PROGRAM_PATH,
    HEALTH_REASON_PREFIX,
    health_document,
    host_health_path,
    render_health_document,
    with_host_health_texts,
)
from cluster_cli.render.slurm_conf import render_slurm_conf
from cluster_cli.secrets_store import ensure_secrets

HETERO = SHIPPED_INVENTORIES["hetero-local"].read_text(encoding="utf-8")
MOUNTS = "health_check:\n  mounts: [/data, \"/scratch-\\u00e9\\\"x\"]\n"  # not ASCII, a quote: escaped


def render_health_texts(cluster: Cluster) -> dict[str, str]:
    """Each compute host's file, as plan makes it from the rendered document."""
    expanded = with_host_health_texts(render_health_document(cluster), cluster)
    return {path.split(":", 1)[1]: text for path, text in expanded.items() if ":" in path}


def health_keys(text: str) -> dict[str, str]:
    lines = render_slurm_conf(load(text)).splitlines()
    return dict(line.split("=", 1) for line in lines if line.startswith("HealthCheck"))


def test_slurm_conf_runs_the_checker_every_300_s_cycling_through_the_nodes() -> None:
    assert health_keys(HETERO) == {
        "HealthCheckProgram": HEALTH_PROGRAM_PATH, "HealthCheckInterval": "300", "HealthCheckNodeState": "ANY,CYCLE",
    }


def test_interval_and_node_states_come_from_the_inventory() -> None:
    text = HETERO + "health_check:\n  interval_s: 60\n  node_state: IDLE,MIXED\n"
    assert health_keys(text)["HealthCheckInterval"] == "60"
    assert health_keys(text)["HealthCheckNodeState"] == "IDLE,MIXED"


def test_switched_off_nothing_is_rendered_and_the_role_gets_no_source(tmp_path: Path) -> None:
    cluster = load(HETERO + "health_check:\n  enabled: false\n")
    assert health_keys(HETERO + "health_check:\n  enabled: false\n") == {}
    assert render_health_document(cluster) == {} and render_health_texts(cluster) == {}
    variables = cluster_variables(cluster, tmp_path / "build", ensure_secrets(tmp_path / "secrets"))
    assert variables["slurmd_health_config_src"] == ""


def test_each_node_gets_its_own_devices_cpus_memory_and_spool_dir() -> None:
    config = json.loads(render_health_texts(load(HETERO))["localhost"])
    assert config["reason_prefix"] == HEALTH_REASON_PREFIX
    assert list(config["nodes"]) == ["h100-1", "h100-2", "l4-1", "cpu1", "cpu2"]
    assert config["nodes"]["l4-1"] == {
        "cpus": 2, "real_memory_mb": 2048, "gpus": 1, "gpu_devices": ["/dev/fake-gpu/nvidia4"],
        "slurm_conf": "/etc/slurm/slurm.conf",
        "free_space_dirs": ["/var/lib/slurm/slurmd/l4-1", "/srv/cluster-training"],
    }
    assert config["nodes"]["h100-2"]["gpu_devices"] == ["/dev/fake-gpu/nvidia2", "/dev/fake-gpu/nvidia3"]
    assert config["nodes"]["cpu1"]["gpus"] == 0


def test_only_hosts_that_run_slurmd_get_a_file() -> None:
    cluster = load(SHIPPED_INVENTORIES["gpu-cluster"].read_text(encoding="utf-8"))
    compute = {name for name, host in cluster.hosts.items() if host.slurmd_nodes}
    assert set(render_health_texts(cluster)) == compute
    assert len(compute) < len(cluster.hosts)


def test_configless_nodes_read_the_slurm_conf_their_slurmd_fetched() -> None:
    cluster = load(SHIPPED_INVENTORIES["gpu-cluster"].read_text(encoding="utf-8"))
    assert cluster.inventory.slurm.configless
    text = next(iter(render_health_texts(cluster).values()))
    node, expected = next(iter(json.loads(text)["nodes"].items()))
    assert expected["slurm_conf"] == f"{cluster.inventory.slurm.paths.spool_dir}/{node}/conf-cache/slurm.conf"


def test_mounts_and_threshold_are_passed_on() -> None:
    config = json.loads(render_health_texts(load(
        HETERO + "health_check:\n  min_free_mb: 5000\n  mounts: [/data, /scratch]\n"))["localhost"])
    assert (config["min_free_mb"], config["mounts"]) == (5000, ["/data", "/scratch"])


def test_unknown_node_states_and_relative_mounts_are_refused() -> None:
    found = problems(HETERO + "health_check:\n  node_state: ANY,SOMETIMES\n  mounts: [data]\n")
    assert len(found) == 2
    assert "health_check.node_state" in found[0] and "not a list of ALLOC, ANY, CYCLE, IDLE, MIXED" in found[0]
    assert "health_check.mounts" in found[1] and "not an absolute path" in found[1]


def test_the_health_check_keys_are_the_inventorys() -> None:
    found = problems(HETERO.replace("    SlurmdDebug: info", "    SlurmdDebug: info\n    HealthCheckProgram: /usr/sbin/nhc"))
    assert len(found) == 1 and "set by the inventory: use health_check.enabled" in found[0]


def test_the_document_holds_each_kind_of_node_once_and_every_node_s_kind() -> None:
    cluster = load(SHIPPED_INVENTORIES["gpu-cluster"].read_text(encoding="utf-8"))
    (path, text), = render_health_document(cluster).items()
    assert path == f"{HEALTH_BUILD_DIR}/{HEALTH_DOCUMENT}"
    document = json.loads(text)
    # json.dumps's text indented by 2, but one line for each node
    settings = {key: value for key, value in document.items() if key != "nodes"}
    node_lines = ",".join(f"\n    {json.dumps(name)}: {kind}" for name, kind in document["nodes"].items())
    assert text == json.dumps(settings, indent=2)[:-2] + f',\n  "nodes": {{{node_lines}\n  }}\n}}\n'
    nodes = [node for host in cluster.hosts.values() for node in host.slurmd_nodes]
    assert list(document["nodes"]) == [node.name for node in nodes]
    assert len(document["kinds"]) == len({node.group.name for node in nodes}) < len(nodes)
    assert document == health_document(cluster)


def test_nodes_of_one_group_with_other_devices_are_of_other_kinds() -> None:
    document = health_document(load(HETERO))
    kinds = [document["kinds"][document["nodes"][name]] for name in ("h100-1", "h100-2")]
    assert kinds[0]["gpu_devices"] != kinds[1]["gpu_devices"] and document["nodes"]["h100-1"] != document["nodes"]["h100-2"]


def test_plan_finds_each_host_s_file_under_its_name() -> None:
    cluster = load(HETERO)
    expanded = with_host_health_texts({"slurm/slurm.conf": "x", **render_health_document(cluster)}, cluster)
    assert json.loads(expanded[host_health_path("localhost")]) == host_health_config(
        health_document(cluster), ["h100-1", "h100-2", "l4-1", "cpu1", "cpu2"])
    assert expanded["slurm/slurm.conf"] == "x"
    assert host_health_path("localhost") == f"{HEALTH_BUILD_DIR}/{HEALTH_DOCUMENT}:localhost"


def test_a_node_the_document_does_not_know_is_named() -> None:
    document = health_document(load(HETERO))
    with pytest.raises(UnknownNode, match="have no node 'gone-1': render again"):
        HostHealthTexts(document).text(["cpu1", "gone-1"])
    with pytest.raises(UnknownNode, match="gone-1"):
        host_health_config(document, ["gone-1"])


def test_the_role_reads_the_document_health_conf_names() -> None:
    role_vars = yaml.safe_load((REPO / "roles" / "slurmd" / "vars" / "main.yml").read_text(encoding="utf-8"))
    assert role_vars["__slurmd_health_document"] == "{{ slurmd_health_config_src ~ '/" + HEALTH_DOCUMENT + "' }}"


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_each_host_s_text_is_json_dumps_of_its_expectations_indented_by_2(name: str) -> None:
    # HostHealthTexts writes what hosts share once; the text must stay json.dumps's, byte for byte
    cluster = load(SHIPPED_INVENTORIES[name].read_text(encoding="utf-8") + MOUNTS)
    document = health_document(cluster)
    texts = render_health_texts(cluster)
    assert texts, "the shipped inventories have compute hosts"
    for host, text in texts.items():
        nodes = [node.name for node in cluster.hosts[host].slurmd_nodes]
        assert text == json.dumps(host_health_config(document, nodes), indent=2) + "\n"
