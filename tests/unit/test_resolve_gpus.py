"""resolve/gpus.py: each node group's GPU device files, against its GPU count and NVML."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, FILE, edit, expected_problems, line_of, load, problems


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "      type: a100\n",
            "      type: a100\n      autodetect: nvml\n",
            [
                (
                    "devices: /dev/nvidia[0-1]",
                    "node_groups[0].gpus.devices",
                    "autodetect: nvml finds the devices; listing them too makes slurmd fail",
                )
            ],
            id="nvml_with_device_files",
        ),
        pytest.param(
            "      devices: /dev/fake[0-1]\n      fake: true\n",
            "      autodetect: nvml\n      fake: true\n",
            [
                (
                    "autodetect: nvml",
                    "node_groups[1].gpus.autodetect",
                    "single-host groups split one machine's GPUs: list devices instead",
                ),
                (
                    "fake: true",
                    "node_groups[1].gpus.fake",
                    "fake devices cannot be autodetected by NVML; use autodetect: off",
                ),
            ],
            id="nvml_with_fake_devices_on_a_single_host",
        ),
        pytest.param(
            "devices: /dev/nvidia[0-1]",
            "devices: /dev/nvidia[0-2]",
            [
                (
                    "devices: /dev/nvidia[0-2]",
                    "node_groups[0].gpus.devices",
                    "3 device files but 2 GPUs (count)",
                )
            ],
            id="device_count_multi_host",
        ),
        pytest.param(
            "devices: /dev/fake[0-1]",
            "devices: /dev/fake0",
            [
                (
                    "devices: /dev/fake0",
                    "node_groups[1].gpus.devices",
                    "1 device files but 2 GPUs (1 per node x 2 nodes)",
                )
            ],
            id="device_count_single_host",
        ),
        pytest.param(
            "devices: /dev/nvidia[0-1]",
            "devices: /dev/nvidia[0,0]",
            [("devices: /dev/nvidia[0,0]", "node_groups[0].gpus.devices", "device files repeat")],
            id="device_files_repeat",
        ),
        pytest.param(
            "devices: /dev/nvidia[0-1]",
            "devices: dev/nvidia[0-1]",
            [
                (
                    "devices: dev/nvidia",
                    "node_groups[0].gpus.devices",
                    "device file 'dev/nvidia0' must be an absolute path",
                )
            ],
            id="device_files_must_be_absolute",
        ),
    ],
)
def test_gpu_device_file_problems(old, new, expected):
    text = edit(BASE, old, new)
    assert problems(text) == expected_problems(text, expected)


def test_nvml_without_device_files_is_fine():
    text = edit(BASE, "      devices: /dev/nvidia[0-1]\n", "      autodetect: nvml\n")
    assert load(text).node("gpu1").gpu_devices == ()


def test_devices_are_required_without_nvml():
    text = edit(BASE, "      devices: /dev/nvidia[0-1]\n", "")
    gpus_line = line_of(text, "type: a100") - 2  # the `gpus:` key of the first group
    assert problems(text) == [
        f"{FILE}:{gpus_line}: node_groups[0].gpus.devices: list the device files (e.g. /dev/nvidia[0-7]) or set autodetect: nvml"
    ]
