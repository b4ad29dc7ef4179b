"""resolve/slurm_build.py: where and how Slurm's NVML plugin is built."""

from __future__ import annotations

from unit_helpers import BASE, edit, problem, problems


def test_the_removed_build_settings_are_refused_by_line():
    """slurm.install and slurm.build's source and tarball fields did nothing (a tarball build was
    refused wherever the build ran): an inventory that still sets them is told where."""
    text = BASE + (
        "slurm:\n  install: build\n  build:\n    source: tarball\n"
        "    tarball_url: https://example.org/slurm-22.05.8.tar.bz2\n    tarball_sha256: " + "0" * 64 + "\n"
    )
    slurm_fields = "build, conf, configless, gid, nvml_plugin, paths, slurmd_port, uid, user, version"
    assert problems(text) == [
        problem(text, "  install: build", "slurm.install", f"unknown field; known fields: {slurm_fields}"),
        problem(text, "    source: tarball", "slurm.build.source", "unknown field; known fields: host, nvml"),
        problem(text, "    tarball_url:", "slurm.build.tarball_url", "unknown field; known fields: host, nvml"),
        problem(text, "    tarball_sha256:", "slurm.build.tarball_sha256", "unknown field; known fields: host, nvml"),
    ]


NVML = edit(BASE, "      type: a100\n      devices: /dev/nvidia[0-1]\n", "      type: a100\n      autodetect: nvml\n")


def test_an_nvml_group_with_the_default_build_is_valid():
    assert problems(NVML) == []


def test_the_nvml_plugin_is_built_with_nvml():
    text = NVML + "slurm:\n  build:\n    nvml: false\n"
    assert problems(text) == [
        problem(text, "    nvml: false", "slurm.build.nvml", "autodetect: nvml needs the NVML plugin (nvml: true)"),
    ]


def test_the_build_host_is_a_cluster_host_or_the_control_node():
    assert problems(NVML + "slurm:\n  build:\n    host: box\n") == []
    assert problems(NVML + "slurm:\n  build:\n    host: localhost\n") == []
    text = NVML + "slurm:\n  build:\n    host: builder\n"
    assert problems(text) == [
        problem(
            text,
            "    host: builder",
            "slurm.build.host",
            "host 'builder' is not a host of this cluster (or 'localhost', the control node)",
        )
    ]


def test_build_settings_are_not_checked_where_no_group_autodetects_or_the_plugin_comes_from_apt():
    assert problems(BASE + "slurm:\n  build:\n    host: builder\n    nvml: false\n") == []
    assert problems(NVML + "slurm:\n  nvml_plugin: apt\n  build:\n    host: builder\n") == []
