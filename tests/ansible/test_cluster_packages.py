"""plugins/action/cluster_packages.py: dpkg-query first, apt only for what is missing, one task result.

The parsing is tested directly; the action itself runs for real under ansible-playbook on this
machine's dpkg (a package that is installed, one that does not exist).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from role_runner import HOST, ansible_playbook, run_play

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("cluster_packages", REPO / "plugins" / "action" / "cluster_packages.py")
A = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(A)

needs_dpkg = pytest.mark.skipif(ansible_playbook() is None or shutil.which("dpkg-query") is None,
                                reason="needs ansible-playbook and dpkg-query")


DPKG = [
    "munge=0.5.15-2 ii ",  # dpkg-query's ${db:Status-Abbrev} ends with a blank for "no error"
    "slurm-client=22.05.8-4+deb12u3 ii",
    "slurmd=22.05.8-4+deb12u3 rc ",  # removed, config files left: not installed
    "mariadb-server=1:10.11.6-0+deb12u1 iU ",  # unpacked, not configured: not installed
]


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        (["munge"], []),
        (["munge=0.5.15-2"], []),
        (["munge=0.5.15-1"], ["munge=0.5.15-1"]),  # installed at another version than the pin
        (["slurm-client", "slurm-client=22.05.8-4+deb12u3"], []),
        (["slurmd"], ["slurmd"]),
        (["slurmd=22.05.8-4+deb12u3"], ["slurmd=22.05.8-4+deb12u3"]),
        (["mariadb-server"], ["mariadb-server"]),
        (["python3-venv"], ["python3-venv"]),  # not in dpkg's answer at all
        (["python3-venv", "munge", "python3-venv"], ["python3-venv", "python3-venv"]),  # order, duplicates kept
        ([], []),
    ],
)
def test_dpkg_missing(wanted: list[str], expected: list[str]) -> None:
    assert A.dpkg_missing(wanted, DPKG) == expected


def test_dpkg_missing_without_an_answer_is_everything() -> None:
    # dpkg-query not run (a run limited by --tags) or it found nothing: every package is missing.
    assert A.dpkg_missing(["munge", "slurmd=1"], []) == ["munge", "slurmd=1"]


def test_dpkg_missing_ignores_lines_that_are_not_package_lines() -> None:
    lines = ["dpkg-query: no packages found matching python3-venv", "", "munge ii "]
    assert A.dpkg_missing(["munge", "python3-venv"], lines) == ["python3-venv"]
    # "munge ii " (no =version): the entry is the bare name, which satisfies only the bare name
    assert A.dpkg_missing(["munge=1"], lines) == ["munge=1"]


def test_dpkg_missing_needs_the_status_at_the_end() -> None:
    assert A.dpkg_missing(["munge"], ["munge=1 ii x"]) == ["munge"]
    assert A.dpkg_missing(["munge"], ["munge=1 iii "]) == ["munge"]


def test_dpkg_absent_is_what_no_version_of_was_installed() -> None:
    """Not an upgrade: munge at another version than its pin is missing (apt installs the pin) but
    not absent (its munged may be running); slurmd removed (rc) and mariadb-server unpacked (iU) are."""
    wanted = ["munge=0.5.15-1", "slurm-client", "slurmd", "mariadb-server=1:10.11.6-0+deb12u1", "python3-venv"]
    assert A.dpkg_absent(wanted, DPKG) == ["slurmd", "mariadb-server", "python3-venv"]
    assert A.dpkg_absent(["munge"], []) == ["munge"]


def test_dpkg_query_command_drops_pins_and_quotes() -> None:
    command = A.dpkg_query_command(["munge=0.5.15-2", "slurm-client", "we ird;rm"])
    assert command.startswith("dpkg-query --show '--showformat=${Package}=${Version} ${db:Status-Abbrev}\\n' ")
    assert command.endswith(" munge slurm-client 'we ird;rm'")


def test_apt_arguments() -> None:
    assert A.apt_arguments(["munge"], None) == {"name": ["munge"], "state": "present", "lock_timeout": 600,
                                                "cache_valid_time": 86400}
    assert A.apt_arguments(["munge"], 101)["policy_rc_d"] == 101


def _run(tmp_path: Path, names: list[str], options: tuple[str, ...] = ()) -> tuple[object, dict]:
    result = tmp_path / "result.json"
    play = {"tasks": [
        {"name": "Install", "cluster_cli.slurm.cluster_packages": {"names": names, "policy_rc_d": 101}, "register": "out",
         "ignore_errors": True},
        {"ansible.builtin.copy": {"content": "{{ out | to_json }}", "dest": str(result)}, "check_mode": False},
    ]}
    run = run_play(tmp_path / "work", play, {HOST: {}}, {}, options=options)
    return run, json.loads(result.read_text()) if result.exists() else {}


@needs_dpkg
def test_installed_packages_need_no_apt_and_change_nothing(tmp_path: Path) -> None:
    run, out = _run(tmp_path, ["dpkg", "coreutils"])
    assert run.returncode == 0, run.explain()
    assert out["changed"] is False and out["missing"] == [] and out["absent"] == []
    assert any(line.startswith("dpkg=") and line.rstrip().endswith("ii") for line in out["dpkg_lines"])
    assert "cache_updated" not in out  # apt did not run
    recap = run.recap()
    assert (recap["ok"], recap["changed"], recap["failed"]) == (2, 1, 0)  # the one change: result.json


@needs_dpkg
def test_a_missing_package_goes_to_apt_and_its_failure_names_it(tmp_path: Path) -> None:
    # --check: apt runs in check mode, changes nothing, and fails on a name no source has.
    run, out = _run(tmp_path, ["dpkg", "cluster-cli-no-such-package"], options=("--check",))
    assert run.returncode == 0, run.explain()  # ignore_errors
    assert out["missing"] == out["absent"] == ["cluster-cli-no-such-package"]
    assert out["failed"] is True
    assert "apt could not install cluster-cli-no-such-package" in out["msg"]


@needs_dpkg
def test_no_names_is_nothing_to_do(tmp_path: Path) -> None:
    run, out = _run(tmp_path, [])
    assert run.returncode == 0, run.explain()
    assert out["changed"] is False and out["dpkg_lines"] == [] and out["missing"] == []
