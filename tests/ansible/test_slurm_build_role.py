"""roles/slurm_build for real on this machine: Slurm built from source with the NVML plugin.

The build (only gpu_nvml.so compiled, packed with dpkg-deb) runs always, about a minute; it builds
and publishes the package but installs nothing (slurm_build_install false). The build that also
installs the package beside Debian's Slurm packages here and loads it in slurmd runs only with
CLUSTER_CLI_SLOW_TESTS=1. Needs root, apt and the Debian mirror; the plugin package, the role's
build tools and the apt source files are put back as they were afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from role_runner import REPO, ansible_playbook, is_root, run_play, run_role

SLOW = os.environ.get("CLUSTER_CLI_SLOW_TESTS") == "1"
SOURCES = Path("/etc/apt/sources.list.d")
SOURCE_FILES = (SOURCES / "cluster-cli-slurm-build.sources", SOURCES / "cluster-cli-slurm-repo.sources")
PLUGIN_PACKAGE = "slurm-wlm-nvml-plugin"

# The role's build tools (apt-utils for apt-ftparchive, ...): the ones missing here are removed again.
BUILD_TOOLS = yaml.safe_load((REPO / "roles" / "slurm_build" / "vars" / "main.yml").read_text())[
    "__slurm_build_tools"
]

pytestmark = [pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")]


def dpkg_version(package: str) -> str | None:
    shown = subprocess.run(
        ["dpkg-query", "--show", "--showformat=${db:Status-Abbrev}${Version}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    return shown.stdout[2:].strip() if shown.returncode == 0 and shown.stdout.startswith("ii") else None


def apt_get(*args: str) -> None:
    subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=600", "-y", *args], check=True, capture_output=True)


@pytest.fixture
def build_host() -> Iterator[None]:
    """Root and apt; the apt sources and the plugin package are restored afterwards."""
    if not is_root() or shutil.which("apt-get") is None:
        pytest.skip("building and installing Slurm packages needs root and apt (Debian)")
    if dpkg_version("slurm-wlm-basic-plugins") is None:
        pytest.skip("Debian's Slurm packages (slurm-wlm-basic-plugins) are not installed here")
    saved = {path: path.read_bytes() if path.exists() else None for path in SOURCE_FILES}
    plugin_before = dpkg_version(PLUGIN_PACKAGE)
    tools_missing = [tool for tool in BUILD_TOOLS if dpkg_version(tool) is None]
    yield
    if plugin_before is None and dpkg_version(PLUGIN_PACKAGE) is not None:
        apt_get("purge", PLUGIN_PACKAGE)
    added_tools = [tool for tool in tools_missing if dpkg_version(tool) is not None]
    if added_tools:
        apt_get("purge", *added_tools)
    changed = False
    for path, content in saved.items():
        now = path.read_bytes() if path.exists() else None
        if now != content:
            changed = True
            if content is None:
                path.unlink()
            else:
                path.write_bytes(content)
    if changed:
        apt_get("update")


def slurmd_gres_probe(tmp_path: Path, nvml_lib_dir: Path | None) -> str:
    """`slurmd -G` of a private node with AutoDetect=nvml: what GPU autodetection says here."""
    conf = tmp_path / "probe"
    conf.mkdir(exist_ok=True)
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    (conf / "slurm.conf").write_text(
        "\n".join(
            [
                "ClusterName=gpuroles",
                f"SlurmctldHost={host}(127.0.0.1)",
                "SlurmctldPort=28090",
                "SlurmdPort=28091",
                f"SlurmdSpoolDir={conf}/spool/%n",
                f"SlurmdPidFile={conf}/slurmd-%n.pid",
                "SlurmdDebug=debug",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "GresTypes=gpu",
                f"NodeName=gpuprobe NodeHostname={host} NodeAddr=127.0.0.1 Port=28091 CPUs=1 Gres=gpu:1",
                "PartitionName=probe Nodes=gpuprobe Default=YES",
                "",
            ]
        )
    )
    (conf / "gres.conf").write_text("NodeName=gpuprobe AutoDetect=nvml\n")
    (conf / "spool" / "gpuprobe").mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SLURM_CONF=str(conf / "slurm.conf"))
    if nvml_lib_dir is not None:
        env["LD_LIBRARY_PATH"] = str(nvml_lib_dir)
    probe = subprocess.run(
        ["/usr/sbin/slurmd", "-G", "-D", "-N", "gpuprobe", "-vv"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return probe.stdout + probe.stderr


@pytest.fixture
def apt_readable_dir() -> Iterator[Path]:
    """apt reads file: repositories as _apt, who cannot enter root's 0700 pytest temporary directories."""
    directory = Path(tempfile.mkdtemp(prefix="cluster-cli-gpu-roles-", dir="/var/tmp"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def deb_fields(deb: Path) -> dict[str, str]:
    """The control fields of a .deb (``dpkg-deb --field``); continuation lines joined with newlines."""
    shown = subprocess.run(
        ["dpkg-deb", "--field", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    fields: dict[str, str] = {}
    name = ""
    for line in shown.splitlines():
        if line.startswith((" ", "\t")):
            fields[name] += "\n" + line.strip()
        else:
            name, _, value = line.partition(":")
            fields[name] = value.strip()
    return fields


def debian_plugin_dir() -> str:
    """The directory Debian's installed slurm-wlm-basic-plugins puts its plugins in."""
    listed = subprocess.run(
        ["dpkg-query", "--listfiles", "slurm-wlm-basic-plugins"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return next(str(Path(line).parent) for line in listed if line.endswith("/slurm-wlm/gpu_generic.so"))


def test_debian_plugin_mode_packs_gpu_nvml_so_without_building_slurm(
    tmp_path: Path, build_host: None, apt_readable_dir: Path
) -> None:
    """The default mode: configure + make of the plugin alone, packed with dpkg-deb; nothing installed."""
    debian_version = dpkg_version("slurm-wlm-basic-plugins")
    work, repo = apt_readable_dir / "work", apt_readable_dir / "repo"
    variables = {
        "slurm_build_version": debian_version,
        "slurm_build_work_dir": str(work),
        "slurm_build_repo_dir": str(repo),
        "slurm_build_install": False,
        "slurm_common_pending_dir": str(tmp_path / "pending"),
    }
    plugin_before = dpkg_version(PLUGIN_PACKAGE)
    run = run_role(
        tmp_path / "first", "slurm_build", extra_vars=variables, hosts=("buildhost",), timeout=1800
    )
    assert run.returncode == 0, run.explain()
    assert f"Building debian Slurm {debian_version} with NVML on buildhost (mode plugin" in run.text
    # Only the plugin was compiled: the rest of the tree has no objects.
    tree = work / "src" / "tree"
    assert (tree / "src" / "plugins" / "gpu" / "nvml" / ".libs" / "gpu_nvml.so").is_file()
    assert not (tree / "src" / "slurmd" / "slurmd" / "slurmd").exists()

    package_version = f"{debian_version}+nvml1"
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()
    deb = repo / f"{PLUGIN_PACKAGE}_{package_version}_{arch}.deb"
    assert sorted(path.name for path in repo.iterdir()) == sorted(
        [deb.name, "Packages", "Release", "build-info.json"]
    )
    fields = deb_fields(deb)
    assert fields["Package"] == PLUGIN_PACKAGE
    assert fields["Version"] == package_version
    assert fields["Architecture"] == arch
    assert fields["Depends"] == f"slurm-wlm-basic-plugins (= {debian_version})"
    assert fields["Suggests"] == "libnvidia-ml1 | libnvidia-ml.so.1"
    assert fields["Maintainer"] == "Debian HPC Team <debian-hpc@lists.debian.org>"
    assert fields["Source"] == f"slurm-wlm ({debian_version})"
    assert fields["Description"].startswith("Slurm NVML GPU plugin")
    assert int(fields["Installed-Size"]) > 0

    plugin_path = f"{debian_plugin_dir()}/gpu_nvml.so"
    contents = subprocess.run(
        ["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    files = [line.split()[-1] for line in contents.splitlines() if not line.startswith("d")]
    assert files == [f".{plugin_path}"], contents
    assert all(" root/root " in line for line in contents.splitlines()), contents
    unpacked = tmp_path / "unpacked"
    subprocess.run(["dpkg-deb", "--extract", str(deb), str(unpacked)], check=True)
    plugin = unpacked / plugin_path.lstrip("/")
    dynamic = subprocess.run(
        ["readelf", "--dynamic", str(plugin)], capture_output=True, text=True, check=True
    ).stdout
    assert "[libnvidia-ml.so.1]" in dynamic and "RPATH" not in dynamic and "RUNPATH" not in dynamic
    sections = subprocess.run(
        ["readelf", "--sections", str(plugin)], capture_output=True, text=True, check=True
    ).stdout
    assert ".symtab" not in sections and ".debug_info" not in sections, "gpu_nvml.so should be stripped"
    packages = (repo / "Packages").read_text()
    assert f"Package: {PLUGIN_PACKAGE}\n" in packages and f"Version: {package_version}\n" in packages

    info = json.loads((repo / "build-info.json").read_text())
    assert info["wanted"]["mode"] == "plugin" and info["wanted"]["package_version"] == package_version
    assert info["build_time"].startswith("0:")

    # Installable beside Debian's packages as they are: dpkg's dry run only reads its database.
    dry = subprocess.run(
        ["dpkg", "--dry-run", "--install", str(deb)], capture_output=True, text=True, check=False
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dpkg_version(PLUGIN_PACKAGE) == plugin_before, "the test must not install the plugin package"
    assert not (tmp_path / "pending" / "restart-slurmd").exists()

    again = run_role(tmp_path / "again", "slurm_build", extra_vars=variables, hosts=("buildhost",))
    assert again.returncode == 0, again.explain()
    assert "build skipped" in again.text
    assert again.recap("buildhost")["changed"] == 0

    # build-info.json records the version suffix: another one would build again (check mode: nothing runs).
    check = run_play(
        tmp_path / "check",
        {"name": "role slurm_build", "roles": [{"role": "slurm_build"}]},
        {"buildhost": {}},
        variables | {"slurm_build_version_suffix": "+nvml2"},
        options=("--check",),
    )
    assert check.returncode == 0, check.explain()
    assert f"Check mode: Slurm {debian_version} would be built on buildhost" in check.text
    assert json.loads((repo / "build-info.json").read_text()) == info


@pytest.mark.slow
@pytest.mark.skipif(
    not SLOW, reason="installs the plugin package on this machine; set CLUSTER_CLI_SLOW_TESTS=1"
)
def test_debian_build_installs_the_nvml_plugin_beside_debians_slurm(
    tmp_path: Path, build_host: None, apt_readable_dir: Path
) -> None:
    debian_version = dpkg_version("slurm-wlm-basic-plugins")
    work, repo = apt_readable_dir / "work", apt_readable_dir / "repo"
    fetch, pending = tmp_path / "fetch", tmp_path / "pending"
    variables = {
        "slurm_build_version": debian_version,
        "slurm_build_work_dir": str(work),
        "slurm_build_repo_dir": str(repo),
        "slurm_build_fetch_dir": str(fetch),
        "slurm_common_pending_dir": str(pending),
    }
    plugin_before = dpkg_version(PLUGIN_PACKAGE)
    run = run_role(
        tmp_path / "first",
        "slurm_build",
        extra_vars=variables,
        hosts=("buildhost", "node2"),
        timeout=4 * 3600,
    )
    assert run.returncode == 0, run.explain()
    assert f"Building debian Slurm {debian_version} with NVML on buildhost" in run.text

    package_version = f"{debian_version}+nvml1"
    deb = repo / f"{PLUGIN_PACKAGE}_{package_version}_amd64.deb"
    assert deb.is_file() and (fetch / deb.name).read_bytes() == deb.read_bytes()
    fields = subprocess.run(
        ["dpkg-deb", "--field", str(deb), "Version", "Depends"], capture_output=True, text=True, check=True
    ).stdout
    assert f"Version: {package_version}" in fields
    assert f"Depends: slurm-wlm-basic-plugins (= {debian_version})" in fields
    assert "libnvidia-ml" not in fields.split("Depends:")[1]

    # Installed beside Debian's packages, which stay at their version.
    assert dpkg_version(PLUGIN_PACKAGE) == package_version
    assert dpkg_version("slurm-wlm-basic-plugins") == debian_version
    assert dpkg_version("slurmd") == debian_version
    listed = subprocess.run(
        ["dpkg", "-L", PLUGIN_PACKAGE], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert any(line.endswith("/slurm-wlm/gpu_nvml.so") and Path(line).is_file() for line in listed), listed
    if plugin_before is None:
        assert (pending / "restart-slurmd").is_file(), "a new plugin should record a slurmd restart"

    # The honest difference on a machine without GPUs: with the NVIDIA library at hand (unpacked
    # by the build, never installed) slurmd now loads gpu/nvml and NVML reports the missing driver.
    without = slurmd_gres_probe(tmp_path, None)
    assert "We were configured with nvml functionality, but that lib wasn't found on the system." in without
    nvml_lib = next((work / "nvml-root").rglob("libnvidia-ml.so")).parent
    with_lib = slurmd_gres_probe(tmp_path, nvml_lib)
    assert "Failed to initialize NVML: Driver Not Loaded" in with_lib
    assert "0 GPU system device(s) detected" in with_lib
    assert "Couldn't find the specified plugin name for gpu/nvml" not in with_lib

    again = run_role(tmp_path / "again", "slurm_build", extra_vars=variables, hosts=("buildhost", "node2"))
    assert again.returncode == 0, again.explain()
    assert "build skipped" in again.text
    assert again.recap("buildhost")["changed"] == 0 and again.recap("node2")["changed"] == 0


def _stand_in_plugin_repo(work: Path, basic_version: str, with_plugin: bool) -> Path:
    """A flat apt repository with a slurm-wlm-nvml-plugin package of the installed Slurm version,
    as a mirror or a cluster-cli bundle serves it (its gpu_nvml.so is a stand-in file: what is
    tested is how the role gets and checks the package, not the plugin)."""
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    multiarch = subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True, text=True,
                               check=True).stdout.strip()
    tree = work / "tree"
    (tree / "DEBIAN").mkdir(parents=True)
    files = tree / "usr" / "lib" / multiarch / "slurm-wlm"
    files.mkdir(parents=True)
    (files / ("gpu_nvml.so" if with_plugin else "README.stand-in")).write_text("stand-in\n")
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {PLUGIN_PACKAGE}\nVersion: {basic_version}+nvml1\nArchitecture: {arch}\n"
        f"Maintainer: cluster-cli tests <root@localhost>\nDepends: slurm-wlm-basic-plugins (= {basic_version})\n"
        "Description: stand-in of the NVML plugin package\n"
    )
    repo = work / "repo"
    repo.mkdir()
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(tree), str(repo / "plugin.deb")],
                   check=True, capture_output=True)
    packages = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=repo, capture_output=True,
                              text=True, check=True).stdout
    (repo / "Packages").write_text(packages)
    repo.chmod(0o755)
    return repo


@pytest.fixture
def apt_source(build_host: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A world-readable directory for the stand-in repository (apt reads it as _apt) and its
    source file, removed afterwards with the package (build_host's clean-up)."""
    if shutil.which("dpkg-scanpackages") is None:
        pytest.skip("dpkg-scanpackages (dpkg-dev) is not installed")
    work = Path(tempfile.mkdtemp(prefix="slurm-build-apt.", dir="/var/tmp"))
    work.chmod(0o755)
    source = SOURCES / "cluster-cli-test-nvml-plugin.sources"
    yield work
    source.unlink(missing_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    apt_get("update")


def _serve(work: Path, with_plugin: bool) -> None:
    repo = _stand_in_plugin_repo(work, dpkg_version("slurm-wlm-basic-plugins") or "", with_plugin)
    (SOURCES / "cluster-cli-test-nvml-plugin.sources").write_text(
        f"Types: deb\nURIs: file:{repo}\nSuites: ./\nTrusted: yes\n"
    )
    apt_get("update")


def test_from_apt_installs_the_package_from_the_hosts_sources_builds_nothing(apt_source: Path, tmp_path: Path) -> None:
    _serve(apt_source / "good", with_plugin=True)
    pending = tmp_path / "pending"
    sources_before = {path: path.read_bytes() if path.exists() else None for path in SOURCE_FILES}
    variables = {"slurm_build_from": "apt", "slurm_common_pending_dir": str(pending),
                 "slurm_build_work_dir": str(tmp_path / "work"), "slurm_build_repo_dir": str(tmp_path / "repo")}
    run = run_role(tmp_path / "first", "slurm_build", extra_vars=variables, timeout=900)
    assert run.returncode == 0, run.explain()
    assert dpkg_version(PLUGIN_PACKAGE) == f"{dpkg_version('slurm-wlm-basic-plugins')}+nvml1"
    assert (pending / "restart-slurmd").is_file(), "slurmd must restart to load the new plugin"
    assert not (tmp_path / "work").exists() and not (tmp_path / "repo").exists(), "nothing built or served"
    assert {path: path.read_bytes() if path.exists() else None for path in SOURCE_FILES} == sources_before, (
        "no source archive or local repository added"
    )
    again = run_role(tmp_path / "again", "slurm_build", extra_vars=variables, timeout=900)
    assert again.returncode == 0 and again.recap("gpuhost")["changed"] == 0, again.explain()


def test_from_apt_refuses_a_package_without_the_plugin(apt_source: Path, tmp_path: Path) -> None:
    _serve(apt_source / "empty", with_plugin=False)
    variables = {"slurm_build_from": "apt", "slurm_common_pending_dir": str(tmp_path / "pending")}
    run = run_role(tmp_path, "slurm_build", extra_vars=variables, timeout=900)
    assert run.returncode != 0, run.explain()
    assert f"gpuhost: the package {PLUGIN_PACKAGE} from this host's apt sources holds no gpu_nvml.so" in run.text
