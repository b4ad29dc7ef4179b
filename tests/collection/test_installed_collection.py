"""The roles as an Ansible collection (galaxy.yml, cluster_cli.slurm), used without cluster-cli.

The collection is built from this checkout with ``ansible-galaxy collection build`` and installed
with ``ansible-galaxy collection install`` from a clean virtual environment: ansible-core and its
dependencies, no cluster-cli. A playbook outside the repository (converge.yml, copied into a
temporary directory, with no ansible.cfg there, in HOME or in ANSIBLE_CONFIG) names the roles by
their fully qualified names, with the variables ``cluster-cli render`` writes for inventory.yaml.

- Every run: the build, the artifact's content, the install, the syntax check (about 5 s).
- As root, with the packages the roles install already there: the converge of slurmctld and two
  slurmd on this host, in namespaces of its own (in_namespace.sh: its own network, /etc, /run and
  Slurm and munge directories), both nodes idle in sinfo afterwards (about 25 s).
- CLUSTER_CLI_COLLECTION_SANITY=1: ``ansible-test sanity`` on the built collection laid out under
  ansible_collections/cluster_cli/slurm in a temporary directory; its exceptions, each with its
  reason, are tests/sanity/ignore-2.19.txt (about 15 s once its environments are made, a minute the
  first time).

The clean environment is made once (pip, from the configured index) and kept in
CLUSTER_CLI_COLLECTION_CACHE (default /var/cache/cluster-cli/collection), beside the home of
ansible-test's own environments; where it cannot be made, the tests skip and say why.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("CLUSTER_CLI_COLLECTION_CACHE", "/var/cache/cluster-cli/collection"))
ANSIBLE_CORE = importlib.metadata.version("ansible-core")
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
ARTIFACT = f"{GALAXY['namespace']}-{GALAXY['name']}-{GALAXY['version']}.tar.gz"
NODES = "coll1,coll2"  # inventory.yaml's nodes
# What the collection is (galaxy.yml's build_ignore leaves out everything else of the repository).
CONTENT = {"CHANGELOG.md", "FILES.json", "MANIFEST.json", "README.md", "meta", "playbooks", "plugins", "roles", "tests"}
# The roles the converge applies (converge.yml), whose packages must be installed already.
PACKAGE_VARIABLES = ("munge_packages", "slurm_common_packages", "slurmctld_packages", "slurmd_packages")


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def explain(done: subprocess.CompletedProcess[str]) -> str:
    return f"{done.args}: exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"


def clean_environment(home: Path, collections: Path | None, venv: Path) -> dict[str, str]:
    """The environment of a user of the collection: no ANSIBLE_* setting but where the collections
    are, nothing of this repository's virtual environment or Python path."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("ANSIBLE_", "CLUSTER_CLI_")) and key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HOME=str(home), PATH=f"{venv / 'bin'}{os.pathsep}/usr/sbin:/usr/bin:/sbin:/bin", ANSIBLE_NOCOLOR="1",
               LANG="C.UTF-8")
    if collections is not None:
        env["ANSIBLE_COLLECTIONS_PATH"] = str(collections)
    return env


@pytest.fixture(scope="session")
def venv() -> Path:
    """A virtual environment with this ansible-core and nothing else, made once and kept (CACHE)."""
    path = CACHE / f"venv-python{PYTHON}-ansible-core-{ANSIBLE_CORE}"
    made = path / ".cluster-cli-complete"
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        pytest.skip(f"cannot keep the clean environment in {CACHE} ({error}); set CLUSTER_CLI_COLLECTION_CACHE")
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not made.is_file():
            shutil.rmtree(path, ignore_errors=True)
            steps = [[sys.executable, "-m", "venv", str(path)],
                     [str(path / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                      "--no-input", f"ansible-core=={ANSIBLE_CORE}"]]
            for step in steps:
                done = run(step, {**os.environ, "PIP_NO_CACHE_DIR": "0"}, REPO)
                if done.returncode != 0:
                    shutil.rmtree(path, ignore_errors=True)
                    pytest.skip(f"cannot make a virtual environment with ansible-core {ANSIBLE_CORE} "
                                f"(no package index?): {(done.stderr or done.stdout).strip()[-500:]}")
            made.touch()
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("collection")


@pytest.fixture(scope="module")
def artifact(venv: Path, work: Path) -> Path:
    """The collection built from this checkout, as its maintainers build it."""
    env = clean_environment(work / "home", None, venv)
    done = run([str(venv / "bin" / "ansible-galaxy"), "collection", "build", "--output-path", str(work / "dist"), "."],
               env, REPO)
    assert done.returncode == 0, explain(done)
    return work / "dist" / ARTIFACT


@pytest.fixture(scope="module")
def user(venv: Path, artifact: Path, work: Path) -> dict[str, Path]:
    """The collection installed with the clean environment's ansible-galaxy; a directory outside the
    repository with converge.yml; the files `cluster-cli render` writes for inventory.yaml."""
    home, play, collections = work / "home", work / "play", work / "collections"
    for directory in (home, play):
        directory.mkdir(exist_ok=True)
    env = clean_environment(home, collections, venv)
    done = run([str(venv / "bin" / "ansible-galaxy"), "collection", "install", "-p", str(collections), str(artifact)],
               env, play)
    assert done.returncode == 0, explain(done)
    shutil.copy(HERE / "converge.yml", play / "converge.yml")
    # the variables cluster-cli writes (its secrets, the munge key among them, in a state home of the test's own)
    render = run([sys.executable, "-m", "cluster_cli", "render", str(HERE / "inventory.yaml"), "-o", str(work / "build")],
                 {**os.environ, "XDG_STATE_HOME": str(work / "state")}, REPO)
    assert render.returncode == 0, explain(render)
    return {"home": home, "play": play, "collections": collections, "build": work / "build", "venv": venv}


def playbook(user: dict[str, Path], *options: str) -> list[str]:
    build = user["build"] / "ansible"
    return [str(user["venv"] / "bin" / "ansible-playbook"), "-i", str(build / "inventory.yml"),
            "-e", f"@{build / 'cluster_vars.yml'}", *options]


def test_the_artifact_holds_the_collection_and_nothing_else(artifact: Path) -> None:
    with tarfile.open(artifact) as archive:
        members = archive.getmembers()
    names = [member.name for member in members]
    assert {name.split("/")[0] for name in names} == CONTENT
    assert [name for name in names if name.startswith("tests/") and not name.startswith("tests/sanity")] == []
    assert "roles/slurmctld/tasks/main.yml" in names and "plugins/plugin_utils/slurm_facts/data/rules.json" in names
    assert not [name for name in names if name.startswith("roles/nvml_emulator")], "a test-only role was shipped"
    assert not [member.name for member in members if member.issym() or member.islnk()]


def test_the_clean_environment_has_ansible_core_and_no_cluster_cli(user: dict[str, Path]) -> None:
    env = clean_environment(user["home"], user["collections"], user["venv"])
    python = str(user["venv"] / "bin" / "python")
    assert run([python, "-c", "import cluster_cli"], env, user["play"]).returncode != 0
    listed = run([python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"], env, user["play"])
    assert listed.returncode == 0 and "ansible-core==" in listed.stdout and "cluster" not in listed.stdout.lower()
    # no ansible.cfg: not in the play's directory, in HOME or through ANSIBLE_CONFIG
    version = run([str(user["venv"] / "bin" / "ansible"), "--version"], env, user["play"])
    assert "config file = None" in version.stdout, version.stdout


def test_the_playbook_and_the_collections_site_playbook_pass_the_syntax_check(user: dict[str, Path]) -> None:
    env = clean_environment(user["home"], user["collections"], user["venv"])
    for target in ("converge.yml", "cluster_cli.slurm.site"):
        done = run([*playbook(user, "--syntax-check"), target], env, user["play"])
        assert done.returncode == 0, explain(done)


def _packages_missing() -> list[str]:
    wanted: list[str] = []
    for variable in PACKAGE_VARIABLES:
        role = next(role for role in ("slurm_common", "slurmctld", "slurmd", "munge") if variable.startswith(role))
        wanted += yaml.safe_load((REPO / "roles" / role / "defaults" / "main.yml").read_text())[variable]
    done = subprocess.run(["dpkg-query", "--show", "--showformat=${Package} ${db:Status-Abbrev}\n", *wanted],
                          capture_output=True, text=True, check=False)
    installed = {line.split()[0] for line in done.stdout.splitlines() if line.split()[1:2] == ["ii"]}
    return [package for package in wanted if package not in installed]


def _converge_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the converge starts system daemons in namespaces of its own (needs root)"
    if shutil.which("unshare") is None or shutil.which("ip") is None or shutil.which("dpkg-query") is None:
        return "the converge needs unshare, ip and dpkg-query (util-linux, iproute2, dpkg)"
    missing = _packages_missing()
    if missing:
        return (f"the roles would install {missing}: the converge installs nothing on this machine "
                "(scripts/test.sh installs them)")
    return None


def _fingerprint(*paths: Path) -> dict[str, str]:
    """What this host holds at ``paths`` (every file's sha256), before and after the converge."""
    found = {}
    for top in paths:
        for path in sorted([top, *top.rglob("*")] if top.is_dir() else [top]):
            if path.is_file() and not path.is_symlink():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def test_the_roles_converge_slurmctld_and_slurmd_by_their_fully_qualified_names(user: dict[str, Path]) -> None:
    reason = _converge_skip_reason()
    if reason:
        pytest.skip(reason)
    host_files = [Path("/etc/slurm"), Path("/etc/munge"), Path("/usr/local/sbin"), Path("/etc/passwd")]
    before = _fingerprint(*host_files)
    env = clean_environment(user["home"], user["collections"], user["venv"])
    # No systemd inside the namespaces (their first process is bash): the daemons run standalone.
    converge = [*playbook(user, "-e", "cluster_service_manager=standalone"), "converge.yml"]
    namespaces = ["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc",
                  "--propagation", "private"]
    done = run([*namespaces, "bash", str(HERE / "in_namespace.sh"), str(user["play"].parent), NODES, *converge],
               env, user["play"], timeout=900)
    assert done.returncode == 0, explain(done)
    for node in NODES.split(","):
        assert f"in_namespace: {node} idle" in done.stdout, explain(done)
    # the roles ran by their fully qualified names, from the installed collection
    for role in ("common", "munge", "slurm_common", "slurmctld", "slurmd", "daemon"):
        assert f"TASK [cluster_cli.slurm.{role} : " in done.stdout, role
    assert str(user["collections"] / "ansible_collections" / "cluster_cli" / "slurm") in done.stdout
    assert _fingerprint(*host_files) == before, "the converge changed this host's files"


@pytest.mark.skipif(os.environ.get("CLUSTER_CLI_COLLECTION_SANITY") != "1",
                    reason="ansible-test sanity runs with CLUSTER_CLI_COLLECTION_SANITY=1 (about 15 s, a minute the first time)")
def test_ansible_test_sanity_passes_on_the_built_collection(user: dict[str, Path], artifact: Path, work: Path) -> None:
    """ansible-test wants the collection at ansible_collections/NAMESPACE/NAME: the artifact is
    unpacked there. Its environments (made by pip) live in a home of its own, kept in CACHE; their pip
    comes from the interpreter's ensurepip (get_pip.py below) instead of the script ansible-test
    downloads from ci-files.testing.ansible.com, which a machine that only reaches a package index
    cannot fetch."""
    root = work / "sanity" / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    root.mkdir(parents=True)
    with tarfile.open(artifact) as archive:
        archive.extractall(root, filter="data")
    home = CACHE / f"ansible-test-home-python{PYTHON}-ansible-core-{ANSIBLE_CORE}"
    (home / ".ansible" / "test" / "cache").mkdir(parents=True, exist_ok=True)
    # the pip version ansible-test bootstraps (python_requirements.py: get_venv_packages)
    source = next(user["venv"].glob("lib/python*/site-packages/ansible_test/_internal/python_requirements.py")).read_text()
    pip = re.search(r"pip='([0-9.]+)'", source)
    assert pip, "ansible-test's pip version not found"
    shutil.copy(HERE / "get_pip.py", home / ".ansible" / "test" / "cache" / f"get_pip_{pip.group(1).replace('.', '_')}.py")
    env = clean_environment(home, None, user["venv"])
    with open(CACHE / ".lock", "w") as lock:  # one ansible-test at a time in that home
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = run([str(user["venv"] / "bin" / "ansible-test"), "sanity", "--python", PYTHON, "--color", "no"],
                   env, root, timeout=1800)
    assert done.returncode == 0, explain(done)
