"""The smoke run's targets from the inventory: one per partition, one per node group in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_cli.cli import main
from cluster_cli.errors import ClusterCliError
from cluster_cli.loader import load_cluster, load_cluster_text
from cluster_cli.smoke_control.remote import bundle
from cluster_cli.smoke_control.inventory_targets import partitions_to_test, smoke_plan

REPO = Path(__file__).resolve().parents[2]
HETERO = REPO / "inventories/examples/hetero-local.yaml"
LOCAL = REPO / "inventories/local/inventory.yaml"


@pytest.fixture(scope="module")
def hetero():
    return load_cluster(HETERO)


def test_every_partition_gets_its_cluster_checks_then_one_target_per_group(hetero):
    plan = smoke_plan(hetero)
    assert [(target.scope, target.label) for target in plan] == [
        ("partition", "gpu"), ("group", "gpu/h100"), ("group", "gpu/l4"),
        ("partition", "h100"), ("group", "h100/h100"),
        ("partition", "cpu"), ("group", "cpu/cpu"),
    ]
    assert plan[0].nodes == ["h100-1", "h100-2", "l4-1"] and plan[0].exclude_nodes == []


def test_a_group_target_has_its_own_gpus_type_devices_and_the_partition_others_excluded(hetero):
    by_label = {target.label: target for target in smoke_plan(hetero, sample=1)}
    h100, l4, cpu = by_label["gpu/h100"], by_label["gpu/l4"], by_label["cpu/cpu"]
    assert (h100.nodes, h100.exclude_nodes, h100.sample) == (["h100-1", "h100-2"], ["l4-1"], 1)
    assert (h100.gpus_per_node, h100.gpu_type, h100.gres_type, h100.fake_gpus) == (2, "H100", "h100", True)
    assert h100.node_devices["h100-2"] == ["/dev/fake-gpu/nvidia2", "/dev/fake-gpu/nvidia3"]
    assert (l4.gpus_per_node, l4.gres_type, l4.exclude_nodes) == (1, "l4", ["h100-1", "h100-2"])
    assert l4.node_devices == {"l4-1": ["/dev/fake-gpu/nvidia4"]}
    assert (cpu.gpus_per_node, cpu.gres_type, cpu.cpus_per_node, cpu.node_devices) == (0, None, 2, {})
    assert by_label["h100/h100"].exclude_nodes == []


def test_a_group_gets_the_thresholds_of_its_gpu_type_only():
    text = HETERO.read_text().replace(
        "  test_user: smoke", "  test_user: smoke\n  thresholds:\n    h100:\n      matmul_bf16_tflops: 700\n"
    )
    by_label = {target.label: target for target in smoke_plan(load_cluster_text(text, "hetero.yaml"))}
    assert by_label["gpu/h100"].thresholds == {"matmul_bf16_tflops": 700}
    assert by_label["gpu/l4"].thresholds == {} and by_label["cpu/cpu"].thresholds == {}
    assert by_label["gpu"].thresholds == {}  # a partition mixing two types holds no type's bounds


def test_partition_choice(hetero):
    assert partitions_to_test(hetero, None) == ["gpu", "h100", "cpu"]
    assert partitions_to_test(hetero, "all") == ["gpu", "h100", "cpu"]
    assert [target.label for target in smoke_plan(hetero, "cpu")] == ["cpu", "cpu/cpu"]
    with pytest.raises(ClusterCliError, match="no partition 'nope'"):
        partitions_to_test(hetero, "nope")


def test_the_single_group_local_inventory_is_one_partition_and_one_group():
    plan = smoke_plan(load_cluster(LOCAL))
    assert [(target.scope, target.group) for target in plan] == [("partition", None), ("group", "local")]
    assert plan[1].nodes == plan[0].nodes and plan[1].exclude_nodes == []


def test_the_remote_bundle_carries_every_target(hetero):
    import io
    import json
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(bundle(smoke_plan(hetero))), mode="r:gz") as archive:
        sent = json.loads(archive.extractfile("target.json").read())  # type: ignore[union-attr]
        names = archive.getnames()
    assert [(each["partition"], each["group"]) for each in sent][:3] == [("gpu", None), ("gpu", "h100"), ("gpu", "l4")]
    assert "cluster_cli/smoke/checks_nodes.py" in names


def test_cli_all_nodes_runs_the_sweep_on_the_plan(monkeypatch):
    from click.testing import CliRunner

    from cluster_cli.smoke import SmokeReport

    seen = {}

    def fake_run(targets, names, progress):
        seen.update(targets=targets, names=names)
        return SmokeReport([], "2026-11-24T00:00:00Z", 0.0, {}, "/w/run")

    monkeypatch.setattr("cluster_cli.smoke.run_smoke", fake_run)
    result = CliRunner().invoke(main, ["smoke", str(HETERO), "--all-nodes", "--sample", "1", "--partition", "gpu"])
    assert result.exit_code == 0, result.output
    assert seen["names"] == ["all-nodes"]
    assert [target.label for target in seen["targets"]] == ["gpu", "gpu/h100", "gpu/l4"]
    assert all(target.sample == 1 for target in seen["targets"] if target.scope == "group")
