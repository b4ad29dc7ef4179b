"""A wheel built from this tree carries what cluster-cli runs, and works installed outside it.

Built without build isolation from the environment's own setuptools (no network), installed with
``pip install --no-deps --target`` into a temporary directory that comes first on PYTHONPATH, and
run from a directory that is not the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cluster_cli.ansible.runner import collections_path

REPO = Path(__file__).resolve().parents[2]


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    # Built from a copy: an in-tree build would leave build/ and *.egg-info in the checkout.
    source = work / "source"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False).stdout
    files = [name for name in tracked.decode().split("\0") if name] or None
    if files is None:  # not a git checkout: everything but the usual clutter
        shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "dist", "__pycache__"))
    else:
        for name in files:
            # links as links: cluster_cli's modules shared with the collection are links into
            # plugins/plugin_utils/, which the build must turn into files
            if (REPO / name).is_symlink():
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                (source / name).symlink_to(os.readlink(REPO / name))
            elif (REPO / name).is_file():
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(source)], cwd=work)
    wheel = next((work / "dist").glob("cluster_cli-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for shipped in ("ansible.cfg", "galaxy.yml", "meta/runtime.yml", "playbooks/site.yml", "roles/slurmd/tasks/main.yml",
                    "plugins/action/cluster_packages.py", "plugins/lookup/role_template.py",
                    "plugins/plugin_utils/slurm_facts/data/rules.json", "training/launch.sh"):
        assert f"cluster_cli/share/{shipped}" in names, f"the wheel lacks {shipped}"
    for shared in ("node_states.py", "hostlist.py", "slurm_facts/change.py", "slurm_facts/data/rules.json",
                   "slurm_associations.py"):
        assert f"cluster_cli/{shared}" in names, f"the wheel lacks cluster_cli/{shared}"
    run([*pip, "install", "--no-deps", "--target", str(work / "site"), str(wheel)], cwd=work)
    return work


def outside(installed: Path, *code_or_args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(installed / "site"), "XDG_STATE_HOME": str(installed / "state")}
    env.pop("CLUSTER_CLI_PROJECT_DIR", None)
    return run([sys.executable, *code_or_args], cwd=installed, env=env)


def test_the_installed_package_finds_its_playbooks_roles_and_training_jobs(installed: Path) -> None:
    done = outside(
        installed,
        "-c",
        "import cluster_cli; from cluster_cli.paths import project_dir;"
        "from cluster_cli.smoke.target import DEFAULT_TRAINING_DIR;"
        "print(cluster_cli.__file__); print(project_dir()); print(DEFAULT_TRAINING_DIR)",
    )
    package, project, training = done.stdout.split()
    site = installed / "site" / "cluster_cli"
    assert Path(package) == site / "__init__.py", "the checkout shadowed the installed package"
    assert Path(project) == site / "share" and Path(training) == site / "share" / "training"


def test_the_installed_cli_renders_and_its_playbook_passes_ansibles_syntax_check(installed: Path) -> None:
    inventory = REPO / "inventories" / "local" / "inventory.yaml"
    build = installed / "build"
    outside(installed, "-m", "cluster_cli", "render", str(inventory), "-o", str(build))
    share = installed / "site" / "cluster_cli" / "share"
    playbook = Path(sys.executable).parent / "ansible-playbook"
    # the collection the roles name their plugins from, linked as cluster-cli's runner links it
    with collections_path(share) as collections:
        env = {**os.environ, "ANSIBLE_CONFIG": str(share / "ansible.cfg"), "ANSIBLE_COLLECTIONS_PATH": str(collections)}
        run([str(playbook), "--syntax-check", "-i", str(build / "ansible" / "inventory.yml"),
             str(share / "playbooks" / "site.yml")], cwd=installed, env=env)


def test_the_wheel_leaves_the_test_only_nvml_emulator_out(installed: Path) -> None:
    assert (REPO / "roles" / "nvml_emulator" / "tasks" / "main.yml").is_file(), "the checkout has the role"
    wheel = next((installed / "dist").glob("cluster_cli-*.whl"))
    shipped = [name for name in zipfile.ZipFile(wheel).namelist() if name.startswith("cluster_cli/share/roles/")]
    assert any(name.startswith("cluster_cli/share/roles/slurmd/") for name in shipped)
    assert not [name for name in shipped if name.startswith("cluster_cli/share/roles/nvml_emulator/")]
    assert not (installed / "site" / "cluster_cli" / "share" / "roles" / "nvml_emulator").exists()


def test_the_installed_package_carries_the_slurm_rules_data(installed: Path) -> None:
    done = outside(
        installed,
        "-c",
        "from cluster_cli import slurm_facts; import cluster_cli.slurm_facts.facts as facts;"
        "print(facts.DATA_DIR); print(' '.join(slurm_facts.supported_series()));"
        "print(slurm_facts.conf_change('22.05', {'slurm.conf': 'KillWait=30'}, {'slurm.conf': 'KillWait=60'}).impact)",
    )
    data_dir, supported, impact = done.stdout.splitlines()
    assert Path(data_dir) == installed / "site" / "cluster_cli" / "slurm_facts" / "data"
    assert supported.split() == ["22.05", "24.11", "26.05"] and impact == "reconfigure"
