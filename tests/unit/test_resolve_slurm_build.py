"""resolve/slurm_build.py: Slurm built from a release tarball."""

from __future__ import annotations

from unit_helpers import BASE, edit, problem, problems


def test_tarball_build_needs_url_and_checksum():
    text = BASE + "slurm:\n  install: build\n  build:\n    source: tarball\n"
    assert problems(text) == [
        problem(text, "  build:", "slurm.build.tarball_sha256", "source: tarball needs tarball_sha256"),
        problem(text, "  build:", "slurm.build.tarball_url", "source: tarball needs tarball_url"),
    ]


NVML = edit(BASE, "      type: a100\n      devices: /dev/nvidia[0-1]\n", "      type: a100\n      autodetect: nvml\n")


def test_an_nvml_group_with_the_default_build_is_valid():
    assert problems(NVML) == []


def test_the_nvml_plugin_is_built_from_debian_source_with_nvml():
    text = NVML + "slurm:\n  build:\n    source: tarball\n    nvml: false\n"
    assert problems(text) == [
        problem(
            text,
            "    source: tarball",
            "slurm.build.source",
            "autodetect: nvml builds the plugin from Debian's source (source: debian); a tarball build is not wired into deploy",
        ),
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
