"""Slurm's own gpu/nvml plugin detects the emulated GPUs: Debian's slurmd -G with AutoDetect=nvml.

Needs root, Debian's slurmd and the plugin built for its exact version by
scripts/build-nvml-plugin.sh (cached in /var/cache/cluster-cli/nvml-plugin/<version>/); skips
with the reason otherwise. No daemon is left running: slurmd -G prints the GRES and exits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nvml_emu import build, have_gcc
from slurmd_gres import H100, MIG_CONF, MIG_MINORS, gpu_sections, missing_requirement, run_slurmd_g

pytestmark = [
    pytest.mark.skipif(not have_gcc(), reason="gcc is needed to build the NVML emulator"),
    pytest.mark.skipif(missing_requirement() is not None, reason=str(missing_requirement())),
]


@pytest.fixture(scope="module")
def lib_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("nvml-emulator-lib")
    build(directory)
    return directory


def test_slurms_plugin_reads_every_emulated_gpu(lib_dir: Path, tmp_path: Path) -> None:
    run = run_slurmd_g(tmp_path, lib_dir, gpu_sections([H100] * 4), "gpu:h100:4")
    assert run.returncode == 0, run.output
    assert "gpu/nvml: _get_system_gpu_list_nvml: 4 GPU system device(s) detected" in run.output
    assert "error" not in run.output, run.output  # e.g. _set_gres_device_desc: stat(/dev/nvidia0)
    records = run.records()
    assert [record["File"] for record in records] == [f"/dev/nvidia{n}" for n in range(4)], run.output
    assert {(record["Type"], record["Cores"], record["Count"]) for record in records} == {("h100", "0-1", "1")}
    # every GPU linked once to each of the three others, -1 for itself
    assert [record["Links"] for record in records] == ["-1,1,1,1", "1,-1,1,1", "1,1,-1,1", "1,1,1,-1"]


def test_nvml_reporting_fewer_gpus_than_slurm_conf(lib_dir: Path, tmp_path: Path) -> None:
    """The inventory says 8, NVML reports 4: slurmd keeps the 4 it found (slurmctld then drains)."""
    run = run_slurmd_g(tmp_path, lib_dir, gpu_sections([H100] * 4), "gpu:h100:8")
    assert run.returncode == 0, run.output
    assert "4 GPU system device(s) detected" in run.output
    assert len(run.records()) == 4, run.output
    assert run.output.count("Discarding the following config-only GPU due to lack of File specification") == 4


@pytest.mark.parametrize(
    ("nvml_name", "configured", "matches"),
    [
        (H100, "h100", True),
        (H100, "H100", True),
        (H100, "nvidia_h100_80gb_hbm3", True),
        (H100, "h100_80gb", True),
        (H100, "h100-80gb", False),
        (H100, "a100", False),
        ("NVIDIA H200", "h200", True),
        ("NVIDIA H200", "h20", True),
        ("NVIDIA A100-SXM4-80GB", "a100", True),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4", True),
        ("NVIDIA A100-SXM4-80GB", "a100_sxm4", False),
        ("NVIDIA L40S", "l40s", True),
        ("NVIDIA L40S", "l40", True),
        ("NVIDIA B200", "b200", True),
    ],
)
def test_configured_type_is_a_case_insensitive_substring_of_the_nvml_name(
    lib_dir: Path, tmp_path: Path, nvml_name: str, configured: str, matches: bool
) -> None:
    run = run_slurmd_g(tmp_path, lib_dir, gpu_sections([nvml_name]), f"gpu:{configured}:1")
    assert run.returncode == 0, run.output
    if matches:  # the detected GPU takes the configured type, as written
        assert [record["Type"] for record in run.records()] == [configured], run.output
    else:  # ignored under its own type, the configured one discarded: the node would have no GPU
        assert run.records() == [], run.output
        assert run.ignored_types() == [nvml_name.lower().replace(" ", "_")], run.output


def test_without_a_driver_slurmd_finds_no_gpu(lib_dir: Path, tmp_path: Path) -> None:
    run = run_slurmd_g(tmp_path, lib_dir, None, "gpu:h100:1")
    assert "Failed to initialize NVML: Driver Not Loaded" in run.output
    assert "0 GPU system device(s) detected" in run.output
    assert run.records() == [], run.output


def test_mig_devices_become_gpus_of_their_profile_type(lib_dir: Path, tmp_path: Path) -> None:
    run = run_slurmd_g(tmp_path, lib_dir, MIG_CONF, "gpu:3g.40gb:2", mig_minors=MIG_MINORS)
    assert run.returncode == 0, run.output
    assert "error" not in run.output, run.output
    records = run.records()
    assert [record["Type"] for record in records] == ["3g.40gb", "3g.40gb"], run.output
    assert [record["File"] for record in records] == [
        "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap12,/dev/nvidia-caps/nvidia-cap13",
        "/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22",
    ]
