"""Per-GPU-type bounds, GPU name normalisation and SmokeTarget construction."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_cli.smoke import SmokeTarget, thresholds


@pytest.mark.parametrize(
    ("name", "normal"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("h100", "H100"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 PCIe", "H100-PCIE"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("Something Else", "SOMETHING ELSE"),
        (None, None),
        ("", None),
    ],
)
def test_normalize_gpu_type(name, normal):
    assert thresholds.normalize_gpu_type(name) == normal


def test_h100_and_h200_floors_from_the_field_notes():
    h100 = thresholds.resolve("NVIDIA H100 80GB HBM3")
    h200 = thresholds.resolve("H200")
    assert h100["matmul_bf16_tflops"] == h200["matmul_bf16_tflops"] == 715.0
    assert h100["copy_tbps"] == 2.85 and h200["copy_tbps"] == 4.1
    assert h100["allreduce_busbw_gbps"] == 350.0
    assert h100["kill_on_bad_exit_max_s"] == 30.0


def test_unknown_and_pcie_types_get_only_the_common_bounds():
    assert thresholds.resolve("H100-PCIE") == thresholds.COMMON
    assert thresholds.resolve(None) == thresholds.COMMON


def test_overrides_replace_and_none_removes():
    bounds = thresholds.resolve("H100", {"allreduce_busbw_gbps": 460.0, "copy_tbps": None})
    assert bounds["allreduce_busbw_gbps"] == 460.0
    assert "copy_tbps" not in bounds
    assert bounds["matmul_bf16_tflops"] == 715.0


def test_unknown_threshold_key_is_refused():
    with pytest.raises(ValueError, match="unknown threshold 'busbw'"):
        thresholds.resolve("H100", {"busbw": 1.0})


def test_every_key_has_a_documented_source():
    assert set(thresholds.SOURCES) == set(thresholds.THRESHOLD_KEYS)


def target(**kwargs):
    return SmokeTarget(**{"nodes": ["n1", "n2"], "work_dir": Path("/shared/smoke"), **kwargs})


def test_target_defaults_and_rank_count():
    cpu = target()
    assert cpu.partition is None and cpu.slurm_conf is None and cpu.user == "smoke"
    assert cpu.ranks_per_node == 1 and not cpu.real_gpus
    gpu = target(gpus_per_node=8, gpu_type="H100")
    assert gpu.real_gpus and gpu.ranks_per_node == 8
    fake = target(gpus_per_node=2, fake_gpus=True, cpu_ranks_per_node=2)
    assert not fake.real_gpus and fake.ranks_per_node == 2
    assert (target().training_dir / "launch.sh").is_file()


def test_target_thresholds_follow_real_gpus_only():
    assert "copy_tbps" not in target(gpus_per_node=2, fake_gpus=True, gpu_type="H100").resolved_thresholds()
    detected = target(gpus_per_node=8).resolved_thresholds("NVIDIA H200")
    assert detected["copy_tbps"] == 4.1
    explicit = target(gpus_per_node=8, gpu_type="H100").resolved_thresholds("NVIDIA H200")
    assert explicit["copy_tbps"] == 2.85  # the inventory's type wins over detection


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": []}, "at least one node"),
        ({"user": "root"}, "must not run as root"),
        ({"gpus_per_node": -1}, "gpus_per_node"),
        ({"check_timeout_s": 0}, "positive"),
        ({"thresholds": {"nope": 1.0}}, "unknown threshold"),
    ],
)
def test_target_rejects_bad_values(kwargs, message):
    with pytest.raises(ValueError, match=message):
        target(**kwargs)


def test_target_summary_is_plain_data():
    summary = target(slurm_conf="/etc/slurm/slurm.conf").summary()
    assert summary["slurm_conf"] == "/etc/slurm/slurm.conf" and summary["work_dir"] == "/shared/smoke"
    assert summary["nodes"] == ["n1", "n2"]
