"""roles/training_env's install phase, run for real on localhost: the virtual environment is made
and its missing pins are found by one command (issue 17: one result per host, not two).

The pins are ones the new environment satisfies without pip (pip itself, at the version the
interpreter's ensurepip installs) or an unknown package in check mode only, so nothing is
downloaded. The test user is an existing account (with a group of its name) at its own ids, so nothing is created.
"""

from __future__ import annotations

import ensurepip
import grp
import json
import pwd
import subprocess
import zipfile
from pathlib import Path

import pytest
from role_runner import TARGET_PYTHON, ansible_playbook, role_vars_files, run_play, run_tasks

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

TASK = "Create the virtual environment where it is missing and find the pinned packages it lacks"
PIP_TASK = "Install the pinned packages, check that torch imports at the pinned version"
SHARED_CHECK = "Find the pinned packages the shared training environment lacks"
SHARED_ASSERT = "Check that the shared training environment has every pin"
# Results per host of the install and run phases (issue 17; their two includes counted), torch
# installed on the first run and a no-op after it: 8 and 8 before the compute cut (the environment
# made and its missing pins found by two tasks, the torch import check a task of its own).
RESULTS_INSTALL_AND_RUN = 6


def _variables(venv: Path, packages: list[str]) -> dict[str, object]:
    user = next(entry for entry in pwd.getpwall()
                if entry.pw_uid > 0 and grp.getgrgid(entry.pw_gid).gr_name == entry.pw_name)
    return {
        "training_env_venv_path": str(venv),
        "training_env_python": TARGET_PYTHON,
        "training_env_torch_version": "",
        "training_env_packages": packages,
        "training_env_system_packages": [],
        "training_env_test_user": user.pw_name,
        "training_env_test_user_uid": user.pw_uid,
        "training_env_test_user_gid": user.pw_gid,
    }


def _pip_version() -> str:
    found = subprocess.run([TARGET_PYTHON, "-c", "import ensurepip; print(ensurepip.version())"],
                           capture_output=True, text=True, check=False)
    if found.returncode != 0:
        pytest.skip(f"{TARGET_PYTHON} has no ensurepip")
    return found.stdout.strip() or ensurepip.version()


def _task_line(stdout: str) -> str:
    """The status line ansible-playbook prints after the merged task's header."""
    after = stdout.split(f"TASK [training_env : {TASK}]", 1)
    assert len(after) == 2, stdout[-3000:]
    return after[1].split("\n", 1)[1].lstrip()


def test_check_mode_creates_nothing_and_counts_every_pin_missing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run = run_tasks(tmp_path / "check", "training_env", ["install"], _variables(venv, ["no-such-pkg==1.0"]), ("--check",))
    assert run.returncode == 0, run.explain()
    assert not venv.exists()
    assert _task_line(run.stdout).startswith("changed:"), run.explain()  # it would create the environment
    # pip would run with every pin: the install task is reached (a command is skipped in check mode).
    assert f"TASK [training_env : {PIP_TASK}]" in run.stdout, run.explain()
    assert run.stdout.split(f"TASK [training_env : {PIP_TASK}]", 1)[1].split("\n", 1)[1].lstrip().startswith("skipping:")


def test_the_environment_is_created_once_and_a_satisfied_pin_installs_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    variables = _variables(venv, [f"pip=={_pip_version()}"])
    first = run_tasks(tmp_path / "first", "training_env", ["install"], variables)
    assert first.returncode == 0, first.explain()
    assert (venv / "bin" / "python").is_symlink()  # on the host's own disk: venv's default links
    assert _task_line(first.stdout).startswith("changed:"), first.explain()
    assert first.recap()["changed"] == 1, first.explain()  # the environment, not pip
    again = run_tasks(tmp_path / "again", "training_env", ["install"], variables)
    assert again.returncode == 0, again.explain()
    assert _task_line(again.stdout).startswith("ok:") and again.recap()["changed"] == 0, again.explain()
    # One command for both: no separate creation task any more.
    assert "Create the virtual environment]" not in again.stdout
    assert "Find the pinned packages the environment lacks]" not in again.stdout


def test_an_environment_that_cannot_be_made_fails_the_task(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    venv = tmp_path / "file" / "venv"  # under a regular file: python -m venv fails
    run = run_tasks(tmp_path / "fail", "training_env", ["install"], _variables(venv, []))
    assert run.returncode != 0 and run.recap()["failed"] == 1, run.explain()
    assert "Not a directory" in _task_line(run.stdout), run.explain()  # python -m venv's own error
    assert PIP_TASK not in run.stdout


def _fake_wheel(directory: Path, name: str, version: str) -> None:
    """A wheel of package ``name`` at ``version`` that holds nothing but its metadata."""
    directory.mkdir(exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: cluster-cli-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


def test_a_ray_version_installs_ray_once_and_none_installs_no_ray(tmp_path: Path) -> None:
    """training_env_ray_version: ray==VERSION beside the other pins, installed when missing, then left alone."""
    wheels = tmp_path / "wheels"
    _fake_wheel(wheels, "ray", "2.60.0")
    venv = tmp_path / "venv"
    variables = _variables(venv, []) | {"training_env_pip_args": ["--no-index", f"--find-links={wheels}"]}
    without = run_tasks(tmp_path / "without", "training_env", ["install"], variables)
    assert without.returncode == 0 and PIP_TASK in without.stdout, without.explain()
    assert without.stdout.split(f"TASK [training_env : {PIP_TASK}]", 1)[1].split("\n", 1)[1].lstrip().startswith("skipping:")
    variables["training_env_ray_version"] = "2.60.0"
    first = run_tasks(tmp_path / "first", "training_env", ["install"], variables)
    assert first.returncode == 0 and first.recap()["changed"] == 1, first.explain()  # pip, not the environment
    assert list(venv.glob("lib/python3*/site-packages/ray-2.60.0.dist-info"))
    again = run_tasks(tmp_path / "again", "training_env", ["install"], variables)
    assert again.returncode == 0 and again.recap()["changed"] == 0, again.explain()


def _fake_torch_wheel(directory: Path, reported: str) -> None:
    """torch 2.13.0 (its metadata) whose ``torch.__version__`` is ``reported``; None: its import fails."""
    directory.mkdir()
    init = "raise ImportError('libtorch is broken')\n" if reported is None else f"__version__ = {reported!r}\n"
    info = "torch-2.13.0.dist-info"
    files = {
        "torch/__init__.py": init,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: cluster-cli-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(directory / "torch-2.13.0-py3-none-any.whl", "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)



@pytest.mark.parametrize(("reported", "message"), [
    ("2.13.0+cpu", None),
    ("2.12.0", "torch does not import at the pinned version 2.13.0 after pip install: it reports 2.12.0"),
    (None, "torch does not import at the pinned version 2.13.0 after pip install: import torch failed (above)"),
])
def test_pip_installs_the_pin_and_torch_must_import_at_it_in_the_same_task(
    tmp_path: Path, reported: str | None, message: str | None
) -> None:
    wheels = tmp_path / "wheels"
    _fake_torch_wheel(wheels, reported)
    variables = _variables(tmp_path / "venv", []) | {
        "training_env_torch_version": "2.13.0",
        "training_env_pip_args": ["--no-index", f"--find-links={wheels}"],
    }
    run = run_tasks(tmp_path / "install", "training_env", ["install", "run"], variables)
    assert f"TASK [training_env : {PIP_TASK}]" in run.stdout, run.explain()
    assert "Check that torch imports at the pinned version]" not in run.stdout  # no task of its own
    if message is None:
        assert run.returncode == 0, run.explain()
        again = run_tasks(tmp_path / "again", "training_env", ["install", "run"], variables)
        assert again.returncode == 0 and again.recap()["changed"] == 0, again.explain()
        for each in (run, again):
            recap = each.recap()
            print(f"training_env install+run results: {recap['ok'] + recap['skipped'] + recap['failed']} {recap}")
            assert recap["ok"] + recap["skipped"] + recap["failed"] <= RESULTS_INSTALL_AND_RUN, recap
    else:
        assert run.returncode != 0 and run.recap()["failed"] == 1, run.explain()
        assert message in run.text, run.explain()


def _hosts_lines(stdout: str, task: str) -> dict[str, str]:
    """Each host's status word under ``task``'s header ("changed", "ok", "skipping", "fatal")."""
    header = f"TASK [training_env : {task}]"
    assert header in stdout, stdout[-3000:]
    section = stdout.split(header, 1)[1].split("\nTASK [", 1)[0].split("\nPLAY RECAP", 1)[0]
    found = {}
    for line in section.splitlines():
        word, _, rest = line.partition(": [")
        if rest:
            found[rest.split("]", 1)[0]] = word.strip()
    return found


def _shared_run(work: Path, hosts: list[str], tasks_from: str, variables: dict[str, object]):
    play = {"name": "training_env", "tasks": [
        {"name": tasks_from, "ansible.builtin.include_role": {"name": "training_env", "tasks_from": tasks_from}}]}
    return run_play(work, play, {host: {} for host in hosts}, variables)


def test_on_a_shared_mount_the_first_host_installs_and_the_others_only_check(tmp_path: Path) -> None:
    """Two hosts of this machine at one path stand for two clients of one shared mount: only the first
    creates the environment and pips into it; the other finds it complete afterwards (shared_check)."""
    wheels = tmp_path / "wheels"
    _fake_wheel(wheels, "ray", "2.60.0")
    variables = _variables(tmp_path / "venv", []) | {
        "training_env_ray_version": "2.60.0",
        "training_env_pip_args": ["--no-index", f"--find-links={wheels}"],
        "training_env_shared_hosts": ["h1", "h2"],
    }
    install = _shared_run(tmp_path / "install", ["h1", "h2"], "install", variables)
    assert install.returncode == 0, install.explain()
    assert _hosts_lines(install.stdout, TASK) == {"h1": "changed", "h2": "skipping"}, install.explain()
    assert _hosts_lines(install.stdout, PIP_TASK) == {"h1": "changed", "h2": "skipping"}, install.explain()
    # its own interpreter, not venv's absolute symlink to /usr/bin/python3 (which sshfs cannot read back)
    assert not (tmp_path / "venv" / "bin" / "python").is_symlink()
    check = _shared_run(tmp_path / "check", ["h1", "h2"], "shared_check", variables)
    assert check.returncode == 0, check.explain()
    assert _hosts_lines(check.stdout, SHARED_CHECK) == {"h1": "ok", "h2": "ok"}, check.explain()

    # A deploy limited to h2 has no h1 in its play: h2 is the first sharing host, and installs.
    variables["training_env_packages"] = [f"pip=={_pip_version()}"]  # satisfied: nothing to pip
    limited = _shared_run(tmp_path / "limited", ["h2"], "install", variables)
    assert limited.returncode == 0 and _hosts_lines(limited.stdout, TASK) == {"h2": "ok"}, limited.explain()

    # A pin the shared environment lacks fails every sharing host's check, naming it.
    variables["training_env_packages"] = ["no-such-pkg==1.0"]
    lacking = _shared_run(tmp_path / "lacking", ["h1", "h2"], "shared_check", variables)
    assert lacking.returncode != 0, lacking.explain()
    assert f"The training environment {tmp_path / 'venv'} on shared storage lacks no-such-pkg==1.0" in lacking.stdout
    assert _hosts_lines(lacking.stdout, SHARED_ASSERT) == {"h1": "fatal", "h2": "fatal"}, lacking.explain()


def test_only_the_host_that_creates_a_shared_environment_gets_venv(tmp_path: Path) -> None:
    """python3-venv makes environments: the first sharing host (the installer) and a host with an
    environment of its own get it, a host that shares one another host made gets only the rest."""
    play = {
        "name": "the environment's packages",
        "vars_files": role_vars_files("training_env"),
        "tasks": [{
            "name": "Write what each host installs",
            "ansible.builtin.copy": {"content": "{{ __training_env_system_packages | to_json }}",
                                     "dest": str(tmp_path) + "/{{ inventory_hostname }}.json", "mode": "0644"},
        }],
    }
    variables = {"training_env_shared_hosts": ["h1", "h2"], "training_env_system_packages": ["python3-venv", "libgomp1"]}
    run = run_play(tmp_path / "work", play, {"h1": {}, "h2": {}, "h3": {}}, variables)
    assert run.returncode == 0, run.explain()
    assert {host: json.loads((tmp_path / f"{host}.json").read_text()) for host in ("h1", "h2", "h3")} == {
        "h1": ["python3-venv", "libgomp1"], "h2": ["libgomp1"], "h3": ["python3-venv", "libgomp1"]}
