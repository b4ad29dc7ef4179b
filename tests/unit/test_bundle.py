"""cluster-cli bundle: the package list from the inventory and the roles, the manifest, the flat
apt repository apt can read, the refusals, and no secret in a bundle.

The archive is not reached here: the apt step is replaced by packages made with dpkg-deb. One test
builds a real bundle from deb.debian.org when CLUSTER_CLI_NETWORK_TESTS=1.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from unit_helpers import SHIPPED_INVENTORIES

from cluster_cli.apt_repo import make_apt_root, run
from cluster_cli.bundle import make, nvml_plugin, packages
from cluster_cli.bundle.make import MANIFEST, BundleOptions, make_bundle, package_mirror_for
from cluster_cli.cli import main
from cluster_cli.errors import RefusedError
from cluster_cli.loader import load_cluster
from cluster_cli.model import Inventory

REPO = Path(__file__).resolve().parents[2]
needs_dpkg = pytest.mark.skipif(
    shutil.which("dpkg-deb") is None or shutil.which("dpkg-scanpackages") is None, reason="needs dpkg-dev"
)


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def fake_deb(pool: Path, name: str, version: str = "1.0-1") -> Path:
    """A real (empty) .deb made with dpkg-deb."""
    tree = pool.parent / f"tree-{name}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\nMaintainer: t <t@example.org>\n"
        f"Description: test package {name}\n"
    )
    pool.mkdir(parents=True, exist_ok=True)
    deb = pool / f"{name}_{version}_amd64.deb"
    run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)])
    shutil.rmtree(tree)
    return deb


@pytest.fixture
def offline_apt(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The apt step without the archive: each asked package becomes a real .deb in the pool."""
    asked: list[list[str]] = []

    def apt_packages(repo: Path, names: list[str], options: BundleOptions) -> list[str]:
        asked.append(names)
        for name in names:
            fake_deb(repo / "pool", name, "22.05.8-4+deb12u3" if name == "slurmd" else "1.0-1")
        return names

    monkeypatch.setattr(make, "_apt_packages", apt_packages)
    return asked


def offline_options(**changes: object) -> BundleOptions:
    return BundleOptions(wheels=False, **changes)  # type: ignore[arg-type]


# -- the package list --------------------------------------------------------------------------------


def test_packages_follow_the_hosts_roles():
    minimal = packages.debian_packages(load_cluster(SHIPPED_INVENTORIES["minimal"]))
    for name in ("slurmctld", "slurmd", "slurmdbd", "mariadb-server", "munge", "slurm-client", "python3-venv",
                 "python3-apt", "libpam-slurm-adopt"):
        assert name in minimal
    assert "rdma-core" not in minimal
    assert "rdma-core" in packages.debian_packages(load_cluster(SHIPPED_INVENTORIES["minimal"]), infiniband=True)
    # the local single-host cluster: no accounting host there means no MariaDB
    local = load_cluster(SHIPPED_INVENTORIES["local"])
    if not local.inventory.accounting.enabled:
        assert "mariadb-server" not in packages.debian_packages(local)


def test_the_package_variables_are_the_roles_and_the_roles_install_them():
    """Each variable the bundle reads is a package list in its role's defaults (the role its name
    starts with), and the role's tasks or vars use it: a renamed or dropped variable fails here, not on
    an air-gapped host."""
    sources = {*packages.EVERY_HOST, packages.INFINIBAND, *(s for group in packages.OF_ROLE.values() for s in group)}
    roles = [path.name for path in (REPO / "roles").iterdir()]
    for variable in sources:
        role = max((name for name in roles if variable.startswith(name + "_")), key=len)
        defaults = yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())
        assert isinstance(defaults[variable], list) and defaults[variable], (role, variable)
        used = "".join(p.read_text() for d in ("tasks", "vars") for p in (REPO / "roles" / role / d).glob("*.yml"))
        assert variable in used, f"roles/{role} does not use {variable}"
    slurmd_vars = (REPO / "roles" / "slurmd" / "vars" / "main.yml").read_text()
    assert f"'{packages.PAM_ADOPT_PACKAGE}'" in slurmd_vars


def test_the_bundle_covers_what_the_test_bed_mirror_carries_for_a_cluster():
    from testbed.mirror import DEFAULT_MIRROR_PACKAGES

    wanted = set(packages.debian_packages(load_cluster(SHIPPED_INVENTORIES["minimal"])))
    # the test bed's extras: python3-pymysql, python3-pip, hello, sudo are for its own tests
    assert wanted - set(DEFAULT_MIRROR_PACKAGES) <= {"python3", "python3-apt", "slurm-wlm-basic-plugins"}


def test_nvml_plugin_only_for_autodetect_nvml():
    assert load_cluster(SHIPPED_INVENTORIES["gpu-cluster"]).inventory.autodetects_gpus()
    assert not load_cluster(SHIPPED_INVENTORIES["minimal"]).inventory.autodetects_gpus()


def test_wheels_are_what_training_env_installs():
    cluster = load_cluster(SHIPPED_INVENTORIES["minimal"])
    training = cluster.inventory.training
    assert packages.pip_requirements(cluster) == [
        f"torch=={training.torch_version}", *training.packages, f"mpi4py=={cluster.inventory.mpi.mpi4py_version}"
    ]


# -- the bundle ----------------------------------------------------------------------------------------


@needs_dpkg
def test_bundle_manifest_lists_every_file_with_its_size_and_sha256(tmp_path, offline_apt):
    out = tmp_path / "bundle"
    made = make_bundle(load_cluster(SHIPPED_INVENTORIES["minimal"]), out, offline_options())
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest == made.manifest
    assert (manifest["cluster"], manifest["release"], manifest["arch"], manifest["python"]) == (
        "minimal", "bookworm", "amd64", "3.11")
    assert manifest["packages"] == offline_apt[0] == manifest["resolved"]
    on_disk = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert [entry["path"] for entry in manifest["files"]] == on_disk
    for entry in manifest["files"]:
        data = (out / entry["path"]).read_bytes()
        assert (entry["size"], entry["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
    assert manifest["total_bytes"] == sum(entry["size"] for entry in manifest["files"])
    assert set(manifest["timings_s"]) >= {"apt", "index", "rendered", "total"}
    assert "rendered/slurm/slurm.conf" in on_disk and "rendered/ansible/inventory.yml" in on_disk
    assert manifest["package_mirror"] == package_mirror_for("/srv/cluster-bundle", False)
    assert (out / "gpu-proof.sh").read_bytes() == (REPO / "scripts" / "gpu-proof.sh").read_bytes()
    assert os.access(out / "gpu-proof.sh", os.X_OK)


def test_package_mirror_section_is_valid_for_the_inventory():
    base = yaml.safe_load(SHIPPED_INVENTORIES["minimal"].read_text())
    Inventory.model_validate(base | {"package_mirror": package_mirror_for("/srv/cluster-bundle", True)})


@needs_dpkg
def test_bundle_apt_dir_is_a_flat_repository_apt_reads(tmp_path, offline_apt):
    out = tmp_path / "bundle"
    make_bundle(load_cluster(SHIPPED_INVENTORIES["minimal"]), out, offline_options(packages=["slurmd", "munge"]))
    options = make_apt_root(tmp_path / "aptroot", [f"deb [trusted=yes] file:{out / 'apt'} ./"])
    shown = run(["apt-cache", *options, "policy", "slurmd", "munge"]).stdout
    assert "Candidate: 22.05.8-4+deb12u3" in shown and "Candidate: 1.0-1" in shown, shown
    uris = run(["apt-get", *options, "download", "--print-uris", "slurmd"]).stdout
    assert f"file:{out}/apt/pool/slurmd_22.05.8-4+deb12u3_amd64.deb" in uris.replace("%2b", "+"), uris


@needs_dpkg
def test_no_secret_goes_into_a_bundle(tmp_path, offline_apt):
    inventory = SHIPPED_INVENTORIES["minimal"]
    runner = CliRunner()
    assert runner.invoke(main, ["render", str(inventory), "-o", str(tmp_path / "build")]).exit_code == 0
    secrets = tmp_path / "state" / "cluster-cli" / "minimal" / "secrets"
    munge_key, password = (secrets / "munge.key").read_bytes(), (secrets / "slurmdbd_password").read_text().strip()
    out = tmp_path / "bundle"
    make_bundle(load_cluster(inventory), out, offline_options())
    names = {p.name for p in out.rglob("*")}
    assert not names & {"munge.key", "slurmdbd_password", "slurmdbd.conf", "secret_vars.yml", "cluster_vars.yml"}
    for path in (p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        assert munge_key not in data and password.encode() not in data, path


@needs_dpkg
def test_a_new_bundle_replaces_an_earlier_one_and_starts_from_its_debs(tmp_path, offline_apt, monkeypatch):
    out = tmp_path / "bundle"
    cluster = load_cluster(SHIPPED_INVENTORIES["minimal"])
    make_bundle(cluster, out, offline_options(packages=["hello"]))
    seen: list[str] = []

    def apt_packages(repo: Path, names: list[str], options: BundleOptions) -> list[str]:
        seen.extend(sorted(p.name for p in (repo / "pool").iterdir()))
        fake_deb(repo / "pool", "munge")
        return names

    monkeypatch.setattr(make, "_apt_packages", apt_packages)
    make_bundle(cluster, out, offline_options(packages=["munge"]))
    assert seen == ["hello_1.0-1_amd64.deb"]
    assert json.loads((out / MANIFEST).read_text())["packages"] == ["munge"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bundle")] == []


def test_a_directory_that_is_not_a_bundle_is_refused_and_left_alone(tmp_path, offline_apt):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "thesis.txt").write_text("mine")
    with pytest.raises(RefusedError, match="not a bundle"):
        make_bundle(load_cluster(SHIPPED_INVENTORIES["minimal"]), out, offline_options())
    assert [p.name for p in out.iterdir()] == ["thesis.txt"]
    assert offline_apt == []


@needs_dpkg
def test_a_failure_leaves_the_earlier_bundle_and_no_staging(tmp_path, offline_apt, monkeypatch):
    out = tmp_path / "bundle"
    cluster = load_cluster(SHIPPED_INVENTORIES["minimal"])
    make_bundle(cluster, out, offline_options(packages=["hello"]))
    before = (out / MANIFEST).read_text()

    def broken(*args: object) -> None:
        raise RefusedError("archive gone")

    monkeypatch.setattr(make, "_apt_packages", broken)
    with pytest.raises(RefusedError, match="archive gone"):
        make_bundle(cluster, out, offline_options(packages=["munge"]))
    assert (out / MANIFEST).read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bundle")] == []


# -- the NVML plugin -----------------------------------------------------------------------------------


def test_plugin_build_refuses_another_release_or_arch():
    nvml_plugin.check_can_build("bookworm", ("bookworm", "amd64"))
    for platform in (("trixie", "amd64"), ("bookworm", "arm64"), ("", "")):
        with pytest.raises(RefusedError, match="release mismatch"):
            nvml_plugin.check_can_build("bookworm", platform)


@needs_dpkg
def test_a_prebuilt_plugin_goes_into_the_pool(tmp_path, offline_apt):
    deb = fake_deb(tmp_path / "built", "slurm-wlm-nvml-plugin", "22.05.8-4+deb12u3+nvml1")
    out = tmp_path / "bundle"
    made = make_bundle(
        load_cluster(SHIPPED_INVENTORIES["gpu-cluster"]), out, offline_options(packages=["slurmd"], nvml_plugin_deb=deb)
    )
    assert made.manifest["nvml_plugin"] == deb.name
    assert "Package: slurm-wlm-nvml-plugin" in (out / "apt" / "Packages").read_text()


@needs_dpkg
def test_the_plugin_is_built_for_the_bundled_slurmd_version(tmp_path, offline_apt, monkeypatch):
    built: list[str] = []

    def build(version: str, work: Path) -> Path:
        built.append(version)
        return fake_deb(tmp_path / "built", "slurm-wlm-nvml-plugin", f"{version}+nvml1")

    monkeypatch.setattr(nvml_plugin, "build", build)
    monkeypatch.setattr(nvml_plugin, "control_node_platform", lambda: ("bookworm", "amd64"))
    make_bundle(load_cluster(SHIPPED_INVENTORIES["gpu-cluster"]), tmp_path / "b", offline_options(packages=["slurmd"]))
    assert built == ["22.05.8-4+deb12u3"]


def test_the_build_playbook_runs_the_role_on_this_machine_only():
    play = yaml.safe_load((REPO / "playbooks" / "build_nvml_plugin.yml").read_text())[0]
    assert (play["hosts"], play["connection"], play["become"]) == ("localhost", "local", True)
    assert [role["role"] for role in play["roles"]] == ["slurm_build"]
    variables = nvml_plugin.build_variables("22.05.8-4+deb12u3")
    assert variables["slurm_build_install"] is False and variables["slurm_build_version"] == "22.05.8-4+deb12u3"


def test_a_prebuilt_plugin_must_be_the_plugin_package(tmp_path):
    wrong = tmp_path / "slurmd_22.05.8-4_amd64.deb"
    wrong.write_bytes(b"x")
    with pytest.raises(RefusedError, match="not a slurm-wlm-nvml-plugin"):
        nvml_plugin.plugin_deb(wrong)


# -- the command -------------------------------------------------------------------------------------------


def test_cli_refuses_a_bad_inventory_with_file_line_and_field(tmp_path):
    bad = tmp_path / "inv.yaml"
    bad.write_text(SHIPPED_INVENTORIES["minimal"].read_text().replace("cores_per_socket: 16", "cores_per_socket: x"))
    result = CliRunner().invoke(main, ["bundle", str(bad), "-o", str(tmp_path / "b"), "--no-wheels"])
    assert result.exit_code == 2, result.output
    assert f"{bad}:" in result.stderr and "cores_per_socket" in result.stderr
    assert not (tmp_path / "b").exists()


def test_cli_refuses_a_non_bundle_directory(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x").write_text("x")
    result = CliRunner().invoke(main, ["bundle", str(SHIPPED_INVENTORIES["minimal"]), "-o", str(tmp_path / "b")])
    assert result.exit_code == 2 and "not a bundle" in result.stderr, result.output


def test_cli_refuses_a_plugin_build_on_another_release(tmp_path, monkeypatch):
    monkeypatch.setattr(nvml_plugin, "control_node_platform", lambda: ("trixie", "amd64"))
    result = CliRunner().invoke(
        main, ["bundle", str(SHIPPED_INVENTORIES["gpu-cluster"]), "-o", str(tmp_path / "b"), "--no-wheels"]
    )
    assert result.exit_code == 2, result.output
    assert "release mismatch" in result.stderr and "--nvml-plugin-deb" in result.stderr
    assert list(tmp_path.glob(".b.*")) == [] and not (tmp_path / "b").exists()


@needs_dpkg
def test_cli_prints_the_summary_with_the_size(tmp_path, offline_apt):
    result = CliRunner().invoke(
        main, ["bundle", str(SHIPPED_INVENTORIES["minimal"]), "-o", str(tmp_path / "b"), "--no-wheels",
               "--packages", "hello,munge"]
    )
    assert result.exit_code == 0, result.output
    assert "cluster 'minimal', Debian bookworm, 2 packages, 0 wheel requirements" in result.stdout
    assert " MB" in result.stdout


# -- from the archive --------------------------------------------------------------------------------------


@pytest.mark.skipif(os.environ.get("CLUSTER_CLI_NETWORK_TESTS") != "1", reason="set CLUSTER_CLI_NETWORK_TESTS=1")
@pytest.mark.skipif(os.geteuid() != 0, reason="apt-get download into the pool as root")
@needs_dpkg
def test_a_real_bundle_from_the_archive_is_a_repository_apt_installs_from(tmp_path):
    out = tmp_path / "bundle"
    options = BundleOptions(wheels=False, packages=["hello"], cache_dir=tmp_path / "cache")
    made = make_bundle(load_cluster(SHIPPED_INVENTORIES["minimal"]), out, options)
    assert "hello" in made.manifest["resolved"] and "libc6" in made.manifest["resolved"]
    apt = make_apt_root(tmp_path / "aptroot", [f"deb [trusted=yes] file:{out / 'apt'} ./"])
    simulated = subprocess.run(
        ["apt-get", *apt, "-o", "Dir::State::Status=/dev/null", "install", "-s", "hello"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "Inst hello" in simulated and "Inst libc6" in simulated, simulated


@needs_dpkg
def test_control_node_wheels_are_this_cluster_cli_and_its_dependencies(tmp_path, offline_apt, monkeypatch):
    commands: list[list[str]] = []
    downloads: list[tuple[Path, list[str], str]] = []
    monkeypatch.setattr(make, "run", lambda argv, **kw: commands.append(argv))
    monkeypatch.setattr(make, "pip_download", lambda d, reqs, links, version: downloads.append((d, reqs, version)))
    out = tmp_path / "b"
    made = make_bundle(load_cluster(SHIPPED_INVENTORIES["minimal"]), out, offline_options(control_node=True))
    assert commands[0][-1] == str(REPO) and "--no-deps" in commands[0]
    (directory, requirements, version), = downloads
    assert directory.name == "control" and version == "3.11"
    assert any(r.startswith("ansible-core") for r in requirements) and not any("torch" in r for r in requirements)
    assert "control_node" in made.manifest["timings_s"]


@needs_dpkg
def test_a_slurm_pin_the_archive_does_not_have_is_refused(tmp_path, offline_apt):
    text = SHIPPED_INVENTORIES["minimal"].read_text() + "\nslurm:\n  version: 22.05.8-4+deb12u2\n"
    inventory = tmp_path / "pinned.yaml"
    inventory.write_text(text)
    with pytest.raises(RefusedError, match="slurm.version is 22.05.8-4[+]deb12u2 but the archive's slurmd is"):
        make_bundle(load_cluster(inventory), tmp_path / "b", offline_options(packages=["slurmd"]))
    assert not (tmp_path / "b").exists()
    inventory.write_text(text.replace("deb12u2", "deb12u3"))
    make_bundle(load_cluster(inventory), tmp_path / "b", offline_options(packages=["slurmd"]))
