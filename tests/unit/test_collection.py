"""The repository root is the Ansible collection cluster_cli.slurm (galaxy.yml): what it holds, and
the code it shares with cluster-cli. tests/collection/ builds, installs and converges it."""

from __future__ import annotations

import ast
import fnmatch
import os
import subprocess
import tomllib
from pathlib import Path

import yaml

from cluster_cli.ansible.runner import COLLECTION_NAME, COLLECTION_NAMESPACE

REPO = Path(__file__).resolve().parents[2]
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
# What the collection is: everything else at the top of the repository is in build_ignore.
CONTENT = {"CHANGELOG.md", "README.md", "galaxy.yml", "meta", "playbooks", "plugins", "roles", "tests"}
PLUGIN_UTILS = REPO / "plugins" / "plugin_utils"


def ignored(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in GALAXY["build_ignore"])


def test_the_collections_name_and_version_are_cluster_clis() -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert (GALAXY["namespace"], GALAXY["name"], GALAXY["version"]) == (COLLECTION_NAMESPACE, COLLECTION_NAME, version)


def test_everything_at_the_top_of_the_repository_is_the_collection_or_left_out_of_it() -> None:
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False).stdout.decode()
    tops = {name.split("/")[0] for name in tracked.split("\0") if name} or {path.name for path in REPO.iterdir()}
    unsorted = sorted(top for top in tops if top not in CONTENT and not ignored(top))
    assert not unsorted, f"neither the collection nor in galaxy.yml's build_ignore: {unsorted}"
    assert not [top for top in CONTENT - {"tests"} if ignored(top)]


def test_of_tests_only_ansible_tests_ignore_file_is_the_collections() -> None:
    folders = sorted(path.name for path in (REPO / "tests").iterdir() if path.is_dir() and path.name != "__pycache__")
    assert [folder for folder in folders if not ignored(f"tests/{folder}")] == ["sanity"]
    assert [path.name for path in (REPO / "tests" / "sanity").iterdir()] == ["ignore-2.19.txt"]
    assert not ignored("roles/slurmd") and ignored("roles/nvml_emulator")  # the test bed's, as setup.py's TEST_ONLY


def test_every_exception_to_ansible_test_sanity_says_why() -> None:
    for line in (REPO / "tests" / "sanity" / "ignore-2.19.txt").read_text().splitlines():
        path, _, reason = line.partition("  # ")
        assert (REPO / path.split()[0]).is_file() and len(reason) > 20, line


def test_each_module_cluster_cli_shares_with_the_collection_is_a_link_to_its_one_copy() -> None:
    """plugins/plugin_utils is the home of what the roles' filters share with cluster-cli: each of
    its files has a link of the same relative path under cluster_cli/, and cluster_cli holds no
    other copy of them."""
    shared = sorted(path.relative_to(PLUGIN_UTILS) for path in PLUGIN_UTILS.rglob("*")
                    if path.is_file() and "__pycache__" not in path.parts)
    assert {"node_states.py", "hostlist.py", "slurm_facts/data/rules.json"} <= {str(path) for path in shared}
    for relative in shared:
        link = REPO / "cluster_cli" / relative
        assert link.is_symlink(), f"cluster_cli/{relative} is not a link to plugins/plugin_utils/{relative}"
        assert link.resolve() == (PLUGIN_UTILS / relative).resolve()
        assert not os.path.isabs(os.readlink(link)), f"cluster_cli/{relative}: a relative link travels with the tree"


def test_the_accounts_module_plan_compares_with_is_a_link_to_the_module_itself() -> None:
    """plan reads slurmdbd's differences with the apply's own code: the module, through a link
    (Ansible modules import no plugin_utils); no other link in cluster_cli leaves plugin_utils."""
    link = REPO / "cluster_cli" / "slurm_associations.py"
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    assert link.resolve() == (REPO / "plugins" / "modules" / "slurm_associations.py").resolve()
    links = [path for path in (REPO / "cluster_cli").rglob("*") if path.is_symlink()]
    outside = [path for path in links if path != link and PLUGIN_UTILS.resolve() not in path.resolve().parents]
    assert not outside, outside


def test_the_collection_imports_nothing_of_cluster_cli() -> None:
    """Its plugins need ansible-core only: what they share with cluster-cli is plugin_utils'."""
    for path in sorted((REPO / "plugins").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            assert not [name for name in names if name.split(".")[0] == "cluster_cli"], path.relative_to(REPO)
