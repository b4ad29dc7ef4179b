"""plugins/lookup/role_template.py, run for real by ansible-playbook: every role template the roles
render through it gives the very text of ansible.builtin.template's lookup, without that lookup's
deep copy of every variable (issue 17: the copy grows with the inventory, once per host and template).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from role_runner import REPO, ansible_playbook, run_play

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

USE = re.compile(r"lookup\('cluster_cli\.slurm\.role_template', '([^']+)'\)")
ROLE_FILES = ("tasks/*.yml", "vars/main.yml", "defaults/main.yml", "handlers/*.yml")

# Enough for every branch of the templates: a first set with every optional part, a second without.
WITH_EVERYTHING = {
    "common_run_dir": "/run/slurm", "common_run_dir_mode": "0755",
    "common_slurm_user": "slurm", "common_slurm_group": "slurm",
    "__common_disabled_suffix": ".cluster-cli.disabled", "__common_mirror_exclusive": True,
    "common_package_mirror_apt_uri": "file:/mirror", "common_package_mirror_apt_suites": ["./", "stable"],
    "common_package_mirror_apt_components": ["main", "contrib"], "common_package_mirror_apt_trusted": True,
    "common_package_mirror_apt_signed_by": "/etc/apt/keyrings/mirror.gpg",
    "__common_pip_conf_marker": "# cluster-cli: package_mirror.pip",
    "common_package_mirror_pip_index_url": "https://pypi.example/simple",
    "common_package_mirror_pip_find_links": ["/mirror/wheels", "/srv/wheels"],
    "common_package_mirror_pip_no_index": True,
    "__slurmd_fake_gpus": [{"path": "/dev/fake-gpu/nvidia0", "minor": 0}, {"path": "/dev/fake-gpu/nvidia1", "minor": 1},
                           {"path": "/dev/other/nvidia2", "minor": 2}],
    "slurmd_fake_gpu_mode": "0666", "slurmd_fake_gpu_major": 195,
    "__slurmd_pam_adopt_admins": ["root", "@admins"],
    "slurm_common_conf_dir": "/etc/slurm test",
}
WITHOUT_OPTIONS = {
    **WITH_EVERYTHING,
    "__common_mirror_exclusive": False, "common_package_mirror_apt_components": [],
    "common_package_mirror_apt_trusted": False, "common_package_mirror_apt_signed_by": "",
    "common_package_mirror_pip_index_url": "", "common_package_mirror_pip_find_links": [],
    "common_package_mirror_pip_no_index": False, "__slurmd_fake_gpus": [], "__slurmd_pam_adopt_admins": [],
}


def roles_templates() -> dict[str, Path]:
    """Each template a role renders with role_template, and its file in that role's templates/."""
    found: dict[str, Path] = {}
    for role in sorted((REPO / "roles").iterdir()):
        for pattern in ROLE_FILES:
            for path in role.glob(pattern):
                for name in USE.findall(path.read_text()):
                    found[name] = role / "templates" / name
    return found


def _compare_play(names: list[str]) -> dict[str, object]:
    return {"tasks": [{
        "name": "Compare role_template with ansible.builtin.template",
        "ansible.builtin.assert": {
            "that": "lookup('cluster_cli.slurm.role_template', item) == lookup('ansible.builtin.template', item)",
            "fail_msg": "{{ item }}: role_template gave {{ lookup('cluster_cli.slurm.role_template', item) | to_json }}, "
                        "ansible.builtin.template {{ lookup('ansible.builtin.template', item) | to_json }}",
        },
        "loop": names,
    }]}


def _with_templates(tmp_path: Path) -> list[str]:
    templates = roles_templates()
    (tmp_path / "templates").mkdir(parents=True)
    for name, path in templates.items():
        shutil.copy(path, tmp_path / "templates" / name)
    return sorted(templates)


def test_the_roles_render_their_cluster_files_templates_with_role_template() -> None:
    templates = roles_templates()
    assert {"tmpfiles-slurm.conf.j2", "cluster-mirror.sources.j2", "pip.conf.j2", "tmpfiles-fake-gpus.conf.j2",
            "access-slurm-adopt.conf.j2", "slurm_conf.sh.j2"} <= set(templates)
    assert all(path.is_file() for path in templates.values()), templates


def test_no_role_renders_a_template_through_the_deep_copying_builtin_lookup() -> None:
    offending = [str(path.relative_to(REPO)) for role in (REPO / "roles").iterdir() for pattern in ROLE_FILES
                 for path in role.glob(pattern) if "lookup('ansible.builtin.template'" in path.read_text()]
    assert offending == []


@pytest.mark.parametrize("variables", [WITH_EVERYTHING, WITHOUT_OPTIONS], ids=["every-option", "no-options"])
def test_role_template_gives_the_builtin_lookups_text(tmp_path: Path, variables: dict[str, object]) -> None:
    names = _with_templates(tmp_path)
    run = run_play(tmp_path, _compare_play(names), {"testhost": {}}, variables)
    assert run.returncode == 0, run.explain()
    assert run.recap("testhost")["ok"] == 1


def test_ansible_managed_is_the_variable_when_the_inventory_sets_one(tmp_path: Path) -> None:
    names = _with_templates(tmp_path)
    variables = {**WITH_EVERYTHING, "ansible_managed": "Managed by cluster-cli"}
    play = _compare_play(names)
    play["tasks"].append({"ansible.builtin.debug": {"msg": "{{ lookup('cluster_cli.slurm.role_template', 'slurm_conf.sh.j2') }}"}})
    run = run_play(tmp_path, play, {"testhost": {}}, variables)
    assert run.returncode == 0, run.explain()
    assert "# Managed by cluster-cli" in run.stdout
    assert "Ansible managed" not in run.stdout


def test_a_missing_template_fails_the_task_and_names_it(tmp_path: Path) -> None:
    _with_templates(tmp_path)
    run = run_play(tmp_path, {"tasks": [{"ansible.builtin.debug": {"msg": "{{ lookup('cluster_cli.slurm.role_template', 'absent.conf.j2') }}"}}]},
                   {"testhost": {}}, WITH_EVERYTHING)
    assert run.returncode != 0
    assert "absent.conf.j2" in run.text
