"""roles/common's package mirror tasks, run for real on localhost against a temporary /etc/apt and pip.conf.

The files the role writes are then used by the real tools: apt-get update reads the temporary apt
configuration (three local flat repositories built here with dpkg-deb and dpkg-scanpackages) and
shows which packages it sees; pip reads the written pip.conf and fetches a wheel from the
find-links directory with no index. Needs root (the role writes root-owned files); nothing outside
the temporary directory is touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from role_runner import HOST, ansible_playbook, is_root, run_play, run_tasks, write_executable

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="the role writes root-owned files (needs root)"),
    pytest.mark.skipif(
        not all(shutil.which(tool) for tool in ("apt-get", "dpkg-deb", "dpkg-scanpackages")),
        reason="needs apt-get, dpkg-deb and dpkg-scanpackages (dpkg-dev)",
    ),
]

SUFFIX = ".cluster-cli.disabled"
MARKER = "# cluster-cli: package_mirror.pip"
# The sources here are a temporary directory's: apt-get update (of this machine's own sources)
# stays off, except in the test of the refresh, which puts a stand-in apt-get on PATH.
NO_REFRESH = {"__common_update_lists": False}


def build_flat_repository(directory: Path, package: str) -> Path:
    """A flat apt repository (suite ./) holding one tiny package."""
    source = directory.parent / f"{package}-src"
    (source / "DEBIAN").mkdir(parents=True)
    (source / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: 1.0\nArchitecture: all\nMaintainer: test <test@example.invalid>\n"
        "Description: cluster-cli package mirror test package\n"
    )
    directory.mkdir(parents=True)
    subprocess.run(
        ["dpkg-deb", "--build", "--root-owner-group", str(source), str(directory / f"{package}_1.0_all.deb")],
        check=True,
        capture_output=True,
    )
    packages = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", "."], cwd=directory, check=True, capture_output=True, text=True
    ).stdout
    (directory / "Packages").write_text(packages)
    return directory


def build_wheel(directory: Path, name: str = "cluster_cli_probe", version: str = "1.0") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{name}/__init__.py", "")
        wheel.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")
    return path


class Host:
    """A temporary root: etc/apt with three sources, etc/pip.conf, and the repositories."""

    def __init__(self, root: Path):
        self.root = root
        self.apt = root / "etc" / "apt"
        self.parts = self.apt / "sources.list.d"
        self.parts.mkdir(parents=True)
        self.pip_conf = root / "etc" / "pip.conf"
        self.repos = {name: build_flat_repository(root / "repos" / name, f"{name}-probe") for name in ("mirror", "main", "extra")}
        self.wheels = root / "wheels"
        build_wheel(self.wheels)
        self.original = {
            self.apt / "sources.list": f"deb [trusted=yes] file:{self.repos['main']} ./\n",
            self.parts / "extra.sources": f"Types: deb\nURIs: file:{self.repos['extra']}\nSuites: ./\nTrusted: yes\n",
            self.parts / "vendor.list": "# a vendor's source, commented out\n",
        }
        for path, text in self.original.items():
            path.write_text(text)
        self.runs = 0

    @property
    def mirror_source(self) -> Path:
        return self.parts / "cluster-mirror.sources"

    def deploy(self, **variables: object) -> object:
        self.runs += 1
        extra = {"__common_apt_dir": str(self.apt), "__common_pip_conf": str(self.pip_conf), **NO_REFRESH, **variables}
        run = run_tasks(self.root / f"run{self.runs}", "common", ["package_mirror"], extra)
        assert run.returncode == 0, run.explain()
        return run

    def apt_sees(self) -> set[str]:
        """The probe packages apt-get update finds through this root's apt configuration."""
        state = self.root / f"apt-state{self.runs}"
        for directory in ("lists/partial", "cache/archives/partial"):
            (state / directory).mkdir(parents=True, exist_ok=True)
        (state / "status").touch()
        options = [
            "-o", f"Dir::Etc::SourceList={self.apt / 'sources.list'}",
            "-o", f"Dir::Etc::SourceParts={self.parts}",
            "-o", f"Dir::State={state}",
            "-o", f"Dir::State::Status={state / 'status'}",
            "-o", f"Dir::Cache={state / 'cache'}",
            "-o", "APT::Sandbox::User=root",
            "-o", "Acquire::Languages=none",
            "-o", "Debug::NoLocking=1",
        ]  # fmt: skip
        update = subprocess.run(["apt-get", *options, "update"], capture_output=True, text=True, check=False)
        assert update.returncode == 0 and "W:" not in update.stdout + update.stderr, update.stdout + update.stderr
        found = subprocess.run(
            ["apt-cache", *options, "pkgnames", ""], capture_output=True, text=True, check=True
        ).stdout.split()
        return {name for name in found if name.endswith("-probe")}

    def apt_files(self) -> dict[str, str]:
        files = [self.apt / "sources.list", *self.parts.iterdir(), *self.apt.glob(f"sources.list{SUFFIX}*")]
        return {str(path.relative_to(self.apt)): path.read_text() for path in files if path.is_file()}


def body(path: Path) -> list[str]:
    """The lines of a written file after its comments (the ansible_managed header among them)."""
    return [line for line in path.read_text().splitlines() if not line.startswith("#")]


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


def test_exclusive_mirror_replaces_every_source_and_removing_it_puts_them_back(host: Host) -> None:
    first = host.deploy(common_package_mirror_apt_uri=f"file:{host.repos['mirror']}", common_package_mirror_apt_trusted=True)
    assert first.recap()["changed"] == 2  # tasks: the mirror's file, the renames (one loop)
    assert "# cluster-cli: package_mirror.apt of the inventory (the only apt source" in host.mirror_source.read_text()
    assert body(host.mirror_source) == [
        "Types: deb",
        f"URIs: file:{host.repos['mirror']}",
        "Suites: ./",
        "Trusted: yes",
    ]
    assert host.apt_files() == {
        "sources.list.d/cluster-mirror.sources": host.mirror_source.read_text(),
        f"sources.list{SUFFIX}": host.original[host.apt / "sources.list"],
        f"sources.list.d/extra.sources{SUFFIX}": host.original[host.parts / "extra.sources"],
        f"sources.list.d/vendor.list{SUFFIX}": host.original[host.parts / "vendor.list"],
    }
    assert host.apt_sees() == {"mirror-probe"}
    assert not host.pip_conf.exists()

    again = host.deploy(common_package_mirror_apt_uri=f"file:{host.repos['mirror']}", common_package_mirror_apt_trusted=True)
    assert again.recap()["changed"] == 0, again.explain()

    # A package puts sources.list back: disabled again, the earlier renamed copy kept numbered.
    (host.apt / "sources.list").write_text("deb [trusted=yes] file:/nowhere ./\n")
    third = host.deploy(common_package_mirror_apt_uri=f"file:{host.repos['mirror']}", common_package_mirror_apt_trusted=True)
    assert third.recap()["changed"] == 1
    assert (host.apt / f"sources.list{SUFFIX}").read_text() == "deb [trusted=yes] file:/nowhere ./\n"
    assert (host.apt / f"sources.list{SUFFIX}.~1~").read_text() == host.original[host.apt / "sources.list"]
    assert not (host.apt / "sources.list").exists()

    # No mirror any more: the mirror's file goes, the sources come back, apt sees them again.
    (host.apt / f"sources.list{SUFFIX}.~1~").rename(host.apt / f"sources.list{SUFFIX}")
    gone = host.deploy()
    assert gone.recap()["changed"] == 2  # tasks: the mirror's file removed, the renames back
    assert host.apt_files() == {str(path.relative_to(host.apt)): text for path, text in host.original.items()}
    assert host.apt_sees() == {"main-probe", "extra-probe"}
    assert host.deploy().recap()["changed"] == 0


def test_an_exclusive_mirror_leaves_cluster_clis_own_sources_alone(host: Host) -> None:
    # slurm_build's local repository of the NVML plugin: disabling it would make every deploy flap.
    own = host.parts / "cluster-cli-slurm-repo.sources"
    own.write_text("Types: deb\nURIs: file:/var/lib/cluster-cli/slurm-repo\nSuites: ./\nTrusted: yes\n")
    run = host.deploy(common_package_mirror_apt_uri=f"file:{host.repos['mirror']}", common_package_mirror_apt_trusted=True)
    assert run.returncode == 0, run.explain()
    assert own.is_file() and not list(host.parts.glob(f"cluster-cli-slurm-repo.sources{SUFFIX}*"))
    assert (host.parts / f"extra.sources{SUFFIX}").is_file(), "the host's other sources are still disabled"


def test_non_exclusive_mirror_is_added_beside_the_sources(host: Host) -> None:
    run = host.deploy(
        common_package_mirror_apt_uri=f"file:{host.repos['mirror']}",
        common_package_mirror_apt_trusted=True,
        common_package_mirror_apt_exclusive=False,
    )
    assert run.recap()["changed"] == 1
    assert "the only apt source" not in host.mirror_source.read_text()
    assert host.apt_sees() == {"mirror-probe", "main-probe", "extra-probe"}
    for path, text in host.original.items():
        assert path.read_text() == text


def test_a_name_taken_again_is_not_overwritten_when_putting_sources_back(host: Host) -> None:
    host.deploy(common_package_mirror_apt_uri=f"file:{host.repos['mirror']}", common_package_mirror_apt_trusted=True)
    (host.parts / "vendor.list").write_text("# new\n")
    run = host.deploy()
    assert (host.parts / "vendor.list").read_text() == "# new\n"
    assert (host.parts / f"vendor.list{SUFFIX}").read_text() == host.original[host.parts / "vendor.list"]
    assert f"{host.parts / f'vendor.list{SUFFIX}'} was not put back" in run.text
    assert (host.apt / "sources.list").read_text() == host.original[host.apt / "sources.list"]


def test_suites_components_and_signed_by_in_the_source(host: Host) -> None:
    key = host.root / "mirror.gpg"
    key.write_bytes(b"not checked here")
    run_tasks(
        host.root / "pre",
        "common",
        ["package_mirror"],
        {
            "__common_apt_dir": str(host.apt),
        **NO_REFRESH,
            **NO_REFRESH,
            "__common_pip_conf": str(host.pip_conf),
            "common_package_mirror_apt_uri": "http://mirror.internal/debian",
            "common_package_mirror_apt_suites": ["bookworm", "bookworm-updates"],
            "common_package_mirror_apt_components": ["main", "non-free-firmware"],
            "common_package_mirror_apt_signed_by": str(key),
            "common_package_mirror_apt_exclusive": False,
        },
    )
    assert body(host.mirror_source) == [
        "Types: deb",
        "URIs: http://mirror.internal/debian",
        "Suites: bookworm bookworm-updates",
        "Components: main non-free-firmware",
        f"Signed-By: {key}",
    ]


def pip_config(host: Host, *args: str) -> subprocess.CompletedProcess[str]:
    """pip with only the written pip.conf (and no PIP_* settings of this machine)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(host.pip_conf), HOME=str(host.root), XDG_CONFIG_HOME=str(host.root / "config"))
    return subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_pip_conf_is_what_pip_reads_and_only_ours_is_removed(host: Host) -> None:
    host.deploy(common_package_mirror_pip_find_links=[str(host.wheels), "http://mirror.internal/wheels"], common_package_mirror_pip_no_index=True)
    assert f"\n{MARKER} of the inventory; removed when that section is.\n" in host.pip_conf.read_text()
    assert body(host.pip_conf) == [
        "[global]",
        "find-links =",
        f"    {host.wheels}",
        "    http://mirror.internal/wheels",
        "no-index = true",
    ]
    assert not host.mirror_source.exists()
    # no index, only find-links: the wheel comes from the directory without any network
    download = pip_config(host, "download", "--no-deps", "--dest", str(host.root / "got"), "cluster_cli_probe==1.0")
    assert download.returncode == 0, download.stdout + download.stderr
    assert [path.name for path in (host.root / "got").iterdir()] == ["cluster_cli_probe-1.0-py3-none-any.whl"]

    host.deploy(common_package_mirror_pip_index_url="http://mirror.internal/pypi/simple")
    listed = pip_config(host, "config", "list")
    assert listed.returncode == 0, listed.stderr
    assert "global.index-url='http://mirror.internal/pypi/simple'" in listed.stdout
    assert "no-index" not in listed.stdout and "find-links" not in listed.stdout

    assert host.deploy().recap()["changed"] == 1
    assert not host.pip_conf.exists()

    host.pip_conf.write_text("[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n")
    assert host.deploy().recap()["changed"] == 0
    assert host.pip_conf.read_text() == "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n"


def test_someone_elses_pip_conf_is_kept_as_a_backup_when_the_mirror_writes_its_own(host: Host) -> None:
    host.pip_conf.write_text("[global]\ntimeout = 60\n")
    host.deploy(common_package_mirror_pip_index_url="http://mirror.internal/pypi/simple")
    backups = [path for path in host.pip_conf.parent.iterdir() if path.name.startswith("pip.conf.")]
    assert [path.read_text() for path in backups] == ["[global]\ntimeout = 60\n"]
    assert MARKER in host.pip_conf.read_text()


def test_check_mode_reports_the_changes_and_makes_none(host: Host) -> None:
    extra = {
        "__common_apt_dir": str(host.apt),
        **NO_REFRESH,
        "__common_pip_conf": str(host.pip_conf),
        "common_package_mirror_apt_uri": f"file:{host.repos['mirror']}",
        "common_package_mirror_pip_index_url": "http://mirror.internal/pypi/simple",
    }
    run = run_tasks(host.root / "check", "common", ["package_mirror"], extra, options=("--check", "--diff"))
    assert run.returncode == 0, run.explain()
    assert run.recap()["changed"] == 2  # the mirror's apt source and pip.conf (one task), the renames
    assert "Types: deb" in run.stdout  # the diff of the new file
    assert host.apt_files() == {str(path.relative_to(host.apt)): text for path, text in host.original.items()}
    assert not host.pip_conf.exists()


@pytest.mark.parametrize("present", [True, False], ids=["key-there", "key-missing"])
def test_the_signing_key_must_be_on_the_host_before_the_source_names_it(host: Host, present: bool) -> None:
    key = host.root / "mirror.gpg"
    if present:
        key.write_bytes(b"not checked here")
    run = run_tasks(host.root / "pre", "common", ["package_mirror"], {
        "__common_apt_dir": str(host.apt),
        **NO_REFRESH,
        "__common_pip_conf": str(host.pip_conf),
        "common_package_mirror_apt_uri": "http://mirror.internal/debian",
        "common_package_mirror_apt_signed_by": str(key),
    })
    if present:
        assert run.returncode == 0, run.explain()
        assert f"Signed-By: {key}" in body(host.mirror_source)
    else:
        assert run.returncode != 0, run.explain()
        assert f"the key file {key} (Signed-By of the package mirror, package_mirror.apt.signed_by) is missing" in run.text
        # nothing half-applied: no source naming the missing key, every other source as it was
        assert not host.mirror_source.exists()
        assert host.apt_files() == {str(path.relative_to(host.apt)): text for path, text in host.original.items()}


@pytest.mark.parametrize("fails", [2, 9], ids=["works-on-the-third-try", "never-works"])
def test_the_package_lists_are_refreshed_after_the_sources_and_retried(host: Host, fails: int) -> None:
    """The module's apt-get update (a stand-in apt-get on PATH that fails ``fails`` times first):
    retried with pauses, then the run goes on or fails with apt's own words."""
    calls = host.root / "apt-get.calls"
    fake = write_executable(host.root / "bin" / "apt-get", (
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f'[ "$(wc -l < {calls})" -gt {fails} ] && exit 0\n'
        'echo "E: Failed to fetch file:/mirror/./Packages  File not found" >&2\nexit 100\n'))
    extra = {"__common_apt_dir": str(host.apt), "__common_pip_conf": str(host.pip_conf),
             "common_package_mirror_apt_uri": "file:/mirror", "common_package_mirror_apt_suites": ["./"]}
    play = {"tasks": [{"name": "sources", "ansible.builtin.include_role": {"name": "common", "tasks_from": "package_mirror"}}]}
    run = run_play(host.root / "work", play, {HOST: {}}, extra,
                   env={"PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"})
    lines = calls.read_text().splitlines()
    assert all(line.endswith(" update") and "DPkg::Lock::Timeout=600" in line for line in lines), lines
    assert host.mirror_source.exists(), "the lists were read before the sources were written"
    if fails < 4:
        assert run.returncode == 0 and len(lines) == fails + 1, run.explain()
    else:
        assert run.returncode != 0 and len(lines) == 4, run.explain()
        assert "apt-get update failed 4 times" in run.text and "Failed to fetch file:/mirror" in run.text
