"""plugins/modules/cluster_files.py, run for real by ansible-playbook: a host's set of files and
directories in one module run, written only when they differ, never through a symbolic link."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from role_runner import HOST, PlaybookRun, ansible_playbook, is_root, run_play

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="sets root ownership (needs root)"),
]


def _converge(tmp_path: Path, args: dict, options: tuple[str, ...] = ()) -> tuple[PlaybookRun, dict]:
    result = tmp_path / "result.json"
    play = {"tasks": [
        {"name": "converge", "cluster_cli.slurm.cluster_files": args, "register": "out"},
        {"ansible.builtin.copy": {"content": "{{ out | to_json }}", "dest": str(result)}, "check_mode": False},
    ]}
    run = run_play(tmp_path / "work", play, {HOST: {}}, {}, options=options)
    return run, json.loads(result.read_text()) if result.exists() else {}


def _set(tmp_path: Path, text: str = "A=1\n") -> dict:
    return {
        "read": [str(tmp_path / "etc" / "a.conf"), str(tmp_path / "etc" / "none.conf")],
        "directories": [{"path": str(tmp_path / "etc"), "owner": "root", "group": "root", "mode": "0750"}],
        "files": [{"dest": str(tmp_path / "etc" / "a.conf"), "content": text, "owner": "root", "group": "root",
                   "mode": "0640"}],
        "absent": [str(tmp_path / "etc" / "old.conf")],
    }


def test_the_set_is_made_once_then_left_alone(tmp_path: Path) -> None:
    run, first = _converge(tmp_path, _set(tmp_path))
    assert run.returncode == 0, run.explain()
    conf = tmp_path / "etc" / "a.conf"
    assert conf.read_text() == "A=1\n" and stat.S_IMODE(conf.stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "etc").stat().st_mode) == 0o750
    assert first["changed"] and first["changed_paths"] == [str(tmp_path / "etc"), str(conf)]
    assert first["contents"] == {str(conf): None, str(tmp_path / "etc" / "none.conf"): None}
    run, second = _converge(tmp_path, _set(tmp_path))
    assert run.returncode == 0 and not second["changed"] and second["changed_paths"] == [], run.explain()
    assert second["contents"][str(conf)] == "A=1\n"


def test_a_changed_file_and_a_stale_one_are_reported_and_fixed(tmp_path: Path) -> None:
    _converge(tmp_path, _set(tmp_path))
    conf, old = tmp_path / "etc" / "a.conf", tmp_path / "etc" / "old.conf"
    old.write_text("stale\n")
    conf.chmod(0o666)
    run, result = _converge(tmp_path, _set(tmp_path, "A=2\n"))
    assert run.returncode == 0, run.explain()
    assert result["changed_paths"] == [str(conf), str(old)]
    assert conf.read_text() == "A=2\n" and stat.S_IMODE(conf.stat().st_mode) == 0o640 and not old.exists()


def test_check_mode_reports_and_changes_nothing(tmp_path: Path) -> None:
    _converge(tmp_path, _set(tmp_path))
    (tmp_path / "etc" / "old.conf").write_text("stale\n")
    run, result = _converge(tmp_path, _set(tmp_path, "A=2\n"), options=("--check",))
    assert run.returncode == 0 and result["changed"], run.explain()
    assert (tmp_path / "etc" / "a.conf").read_text() == "A=1\n" and (tmp_path / "etc" / "old.conf").exists()


def test_a_missing_required_file_fails_the_run_before_anything_changes(tmp_path: Path) -> None:
    key, link = tmp_path / "key.gpg", tmp_path / "key-link.gpg"
    required = [{"path": str(key), "message": "the key is missing"}, {"path": str(link)}]
    run, _ = _converge(tmp_path, {**_set(tmp_path), "required": required})
    assert run.returncode != 0, run.explain()
    assert f"the key is missing; {link} is missing" in run.text
    assert not (tmp_path / "etc").exists(), "a directory was made before the check"
    key.write_text("key\n")
    link.symlink_to(key)  # a link to a file will do
    run, result = _converge(tmp_path, {**_set(tmp_path), "required": required})
    assert run.returncode == 0 and result["changed"], run.explain()


def test_a_symbolic_link_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    target = tmp_path / "target"
    target.write_text("precious\n")
    os.symlink(target, tmp_path / "etc" / "a.conf")
    args = _set(tmp_path)
    args["read"] = []
    run, _ = _converge(tmp_path, args)
    assert run.returncode != 0 and "is not a regular file" in run.text, run.explain()
    assert target.read_text() == "precious\n"


def test_a_symbolic_link_is_never_read(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "secret").write_text("key\n")
    os.symlink(tmp_path / "secret", tmp_path / "etc" / "a.conf")
    run, _result = _converge(tmp_path, {"read": [str(tmp_path / "etc" / "a.conf")]})
    assert run.returncode != 0 and "not read" in run.text, run.explain()
    assert "key" not in run.text


def test_backup_keeps_the_old_bytes_beside_the_new_file(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "a.conf").write_text("theirs\n")
    args = _set(tmp_path)
    args["files"][0]["backup"] = True
    run, result = _converge(tmp_path, args)
    assert run.returncode == 0, run.explain()
    backup = Path(result["backups"][str(tmp_path / "etc" / "a.conf")])
    assert backup.parent == tmp_path / "etc" and backup.read_text() == "theirs\n"


def test_a_kept_directory_is_made_where_missing_and_left_as_it_is_where_it_exists(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    wanted = {"directories": [{"path": str(shared), "owner": "root", "group": "root", "mode": "0755", "keep": True}]}
    run, made = _converge(tmp_path, wanted)
    assert run.returncode == 0 and made["changed_paths"] == [str(shared)], run.explain()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    shared.chmod(0o1777)  # a file system mounted there, with its own mode: not ours to change
    run, again = _converge(tmp_path, wanted)
    assert run.returncode == 0 and not again["changed"], run.explain()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777


def test_a_file_where_a_directory_belongs_is_refused_naming_its_setting(tmp_path: Path) -> None:
    (tmp_path / "smoke").write_text("not a directory\n")
    wanted = {"directories": [{"path": str(tmp_path / "smoke"), "keep": True, "label": "training_env_work_dir"}]}
    run, _ = _converge(tmp_path, wanted)
    assert run.returncode != 0, run.explain()
    assert f"{tmp_path / 'smoke'} (training_env_work_dir) exists and is not a directory" in run.text
    assert (tmp_path / "smoke").read_text() == "not a directory\n"


def _devices(tmp_path: Path) -> dict:
    dev = tmp_path / "dev" / "fake-gpu"
    return {
        "directories": [{"path": str(dev), "owner": "root", "group": "root", "mode": "0755"}],
        "devices": [{"path": str(dev / f"nvidia{minor}"), "major": 195, "minor": minor, "owner": "root",
                     "group": "root", "mode": "0666"} for minor in (0, 1)],
    }


def test_character_devices_are_made_once_then_left_alone(tmp_path: Path) -> None:
    run, first = _converge(tmp_path, _devices(tmp_path))
    assert run.returncode == 0, run.explain()
    dev = tmp_path / "dev" / "fake-gpu"
    for minor in (0, 1):
        info = (dev / f"nvidia{minor}").lstat()
        assert stat.S_ISCHR(info.st_mode) and (os.major(info.st_rdev), os.minor(info.st_rdev)) == (195, minor)
        assert stat.S_IMODE(info.st_mode) == 0o666
    assert first["changed_paths"] == [str(dev), str(dev / "nvidia0"), str(dev / "nvidia1")]
    run, second = _converge(tmp_path, _devices(tmp_path))
    assert run.returncode == 0 and second["changed_paths"] == [], run.explain()


@pytest.mark.parametrize("found", ["file", "other device", "symbolic link"])
def test_something_else_at_a_device_path_is_never_replaced(tmp_path: Path, found: str) -> None:
    dev = tmp_path / "dev" / "fake-gpu"
    dev.mkdir(parents=True)
    wrong = dev / "nvidia1"
    if found == "file":
        wrong.write_text("precious\n")
    elif found == "other device":
        os.mknod(wrong, stat.S_IFCHR | 0o600, os.makedev(195, 7))
    else:
        os.symlink("/dev/null", wrong)
    before = wrong.lstat()
    run, _ = _converge(tmp_path, _devices(tmp_path))
    assert run.returncode != 0, run.explain()
    assert f"These paths exist but are not the expected character devices: {wrong} is" in run.text, run.explain()
    assert "Remove them so they can be made again." in run.text
    after = wrong.lstat()
    assert (after.st_mode, after.st_rdev, after.st_ino) == (before.st_mode, before.st_rdev, before.st_ino)
    assert not (dev / "nvidia0").exists(), "the run changed something before it refused"


def test_check_mode_makes_no_device(tmp_path: Path) -> None:
    run, result = _converge(tmp_path, _devices(tmp_path), options=("--check",))
    assert run.returncode == 0 and result["changed"], run.explain()
    assert not (tmp_path / "dev").exists()
