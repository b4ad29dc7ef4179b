"""MPI launch as inventory data (cluster_cli/mpi_launch.py): whether it is on, slurm.conf's MpiDefault
and TmpFS, what the roles and the bundle install, and the refusals at file:line."""

from __future__ import annotations

from pathlib import Path

from unit_helpers import BASE, SHIPPED_INVENTORIES, edit, load, problem, problems

from cluster_cli.ansible.variables import cluster_variables
from cluster_cli.bundle.packages import debian_packages, pip_requirements
from cluster_cli.loader import load_cluster
from cluster_cli.mpi_launch import MPI_PACKAGES
from cluster_cli.render.slurm_conf import global_settings
from cluster_cli.secrets_store import ClusterSecrets

# BASE's GPU nodes gpu[1-4] run on four hosts; these run on one.
ONE_HOST = edit(
    edit(BASE, "    nodes: gpu[1-4]\n    addresses: 10.0.1.[1-4]\n", "    nodes: gpu[1-4]\n    host: box\n    base_port: 17101\n"),
    "devices: /dev/nvidia[0-1]", "devices: /dev/nvidia[0-7]",
)
PINNED_2605 = "slurm:\n  version: 26.05.5-1\n"


def _variables(text: str, tmp_path: Path) -> dict:
    secrets = tmp_path / "secrets"
    return cluster_variables(load(text), tmp_path, ClusterSecrets(secrets, secrets / "munge.key", secrets / "db"))


def test_on_by_default_where_gpu_nodes_run_on_more_than_one_host(tmp_path: Path) -> None:
    settings = global_settings(load(BASE))
    assert settings["MpiDefault"] == "pmix"
    variables = _variables(BASE, tmp_path)
    assert variables["slurmd_mpi_packages"] == variables["login_mpi_packages"] == list(MPI_PACKAGES)
    assert variables["training_env_packages"][-1] == "mpi4py==4.1.2"


def test_off_by_default_on_one_host_and_where_the_inventory_says_so(tmp_path: Path) -> None:
    for text in (ONE_HOST, BASE + "mpi:\n  enabled: false\n"):
        assert global_settings(load(text))["MpiDefault"] == "none"
        assert "TmpFS" not in global_settings(load(text))
        variables = _variables(text, tmp_path)
        assert variables["slurmd_mpi_packages"] == variables["login_mpi_packages"] == []
        assert not any(pin.startswith("mpi4py") for pin in variables["training_env_packages"])


def test_a_host_with_several_slurmd_gives_each_node_its_own_tmpfs() -> None:
    """PMIx's per-step client directory is named by user, job and step only: in one TmpFS, two
    nodes of one host would make the same one (the launch fails)."""
    text = ONE_HOST + "mpi:\n  enabled: true\n  plugin: pmi2\n"
    settings = global_settings(load(text))
    assert settings["MpiDefault"] == "pmi2"
    assert settings["TmpFS"] == settings["SlurmdSpoolDir"] == "/var/lib/slurm/slurmd/%n"
    minimal = load_cluster(SHIPPED_INVENTORIES["minimal"])  # one slurmd per host
    assert global_settings(minimal)["MpiDefault"] == "pmix" and "TmpFS" not in global_settings(minimal)


def test_the_local_cluster_runs_pmix_with_a_tmpfs_per_node() -> None:
    settings = global_settings(load_cluster(SHIPPED_INVENTORIES["local"]))
    assert (settings["MpiDefault"], settings["TmpFS"]) == ("pmix", settings["SlurmdSpoolDir"])


def test_a_series_without_the_pmix_plugin_defaults_to_pmi2_and_refuses_pmix() -> None:
    assert global_settings(load(BASE + PINNED_2605))["MpiDefault"] == "pmi2"
    text = BASE + PINNED_2605 + "mpi:\n  plugin: pmix\n"
    assert problems(text) == [problem(
        text, "plugin: pmix", "mpi.plugin",
        "MpiDefault=pmix: Slurm 26.05 has no mpi/pmix plugin (no mpi_pmix.so in its Debian packages):"
        " mpi/cray_shasta, mpi/pmi2",
    )]
    assert problems(BASE + "slurm:\n  version: 22.05.8-4+deb12u3\nmpi:\n  plugin: pmix\n") == []


def test_mpidefault_is_the_inventorys_not_an_override() -> None:
    text = BASE + "slurm:\n  conf:\n    MpiDefault: pmix\n"
    assert problems(text) == [problem(text, "MpiDefault: pmix", "slurm.conf.MpiDefault", "set by the inventory: use mpi.plugin")]


def test_unknown_plugins_are_refused_by_the_model() -> None:
    text = BASE + "mpi:\n  plugin: openmpi\n"
    assert len(problems(text)) == 1 and "mpi.plugin" in problems(text)[0]


def test_a_site_pin_of_mpi4py_is_kept_not_doubled(tmp_path: Path) -> None:
    text = BASE + "training:\n  packages: [numpy==2.4.6, mpi4py==4.0.3]\n"
    assert _variables(text, tmp_path)["training_env_packages"] == ["numpy==2.4.6", "mpi4py==4.0.3"]
    assert pip_requirements(load(text))[-2:] == ["numpy==2.4.6", "mpi4py==4.0.3"]
    without = _variables(BASE + "mpi:\n  mpi4py_version: null\n", tmp_path)["training_env_packages"]
    assert not any(pin.startswith("mpi4py") for pin in without)


def test_the_bundle_carries_the_mpi_packages_only_with_mpi_on() -> None:
    assert set(MPI_PACKAGES) <= set(debian_packages(load(BASE)))
    assert not set(MPI_PACKAGES) & set(debian_packages(load(ONE_HOST)))
