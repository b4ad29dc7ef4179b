"""Root's writes into the test user's work directory follow no link the user planted there.

Each test gives a throwaway directory to ``nobody`` (uid 65534), plants a symbolic link (or swaps
a directory) where the runner would mkdir, chown, chmod or write, points it at a root-owned
"victim" in the same tmp directory, runs the real function as root, and checks the victim is
untouched and the call refused or wrote safely beside the link. Reading a job's files as root
follows no link either, and a FIFO planted there does not block.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster_cli.smoke import suite, userdir
from cluster_cli.smoke.context import CheckContext, read_json
from cluster_cli.smoke.suite_errors import SmokeSetupError
from cluster_cli.smoke.report import SmokeReport, write_json
from cluster_cli.smoke.slurm import User
from cluster_cli.smoke.text import read_excerpt, read_job_text
from cluster_cli.smoke.userdir import UserDir

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: chown to another user, act as root")

NOBODY = User("nobody", 65534, 65534, "/nonexistent")
OTHER_UID = 65533
VICTIM_TEXT = b"root's own file\n"


def _snapshot(path: Path) -> tuple[int, int, int, bytes | list[str]]:
    info = path.lstat()
    content: bytes | list[str] = sorted(os.listdir(path)) if path.is_dir() else path.read_bytes()
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode), content


@pytest.fixture
def bed(tmp_path: Path) -> dict[str, Path]:
    """work/ (nobody's), victim-dir/ (root's 0700) and victim-file (root's 0600) beside it."""
    tmp_path.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    os.chown(work, NOBODY.uid, NOBODY.gid)
    victim_dir = tmp_path / "victim-dir"
    victim_dir.mkdir(mode=0o700)
    (victim_dir / "inside").write_bytes(VICTIM_TEXT)
    victim_file = tmp_path / "victim-file"
    victim_file.write_bytes(VICTIM_TEXT)
    victim_file.chmod(0o600)
    return {"work": work, "victim_dir": victim_dir, "victim_file": victim_file}


def _outcome(bed: dict[str, Path], action: Callable[[], Any]) -> str | None:
    """Run ``action``; the victims must be as they were. Its refusal's message, or None."""
    before = {name: _snapshot(bed[name]) for name in ("victim_dir", "victim_file")}
    try:
        action()
        refusal = None
    except SmokeSetupError as error:
        refusal = str(error)
    assert {name: _snapshot(bed[name]) for name in ("victim_dir", "victim_file")} == before
    return refusal


def test_a_work_dir_the_user_owns_gets_a_run_dir_of_the_user(bed: dict[str, Path]) -> None:
    with suite._open_run_dir(bed["work"], "run-1", NOBODY) as run_home:
        assert run_home.path == bed["work"] / "run-1"
    info = (bed["work"] / "run-1").lstat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY.uid, NOBODY.gid, 0o755)


def test_a_missing_work_dir_is_made_under_a_root_parent_and_given_to_the_user(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    with suite._open_run_dir(tmp_path / "srv" / "training", "run-1", NOBODY):
        pass
    assert (tmp_path / "srv").stat().st_uid == 0
    assert (tmp_path / "srv" / "training").stat().st_uid == NOBODY.uid
    assert (tmp_path / "srv" / "training" / "run-1").stat().st_uid == NOBODY.uid


def test_the_run_dir_name_planted_as_a_link_is_refused(bed: dict[str, Path]) -> None:
    (bed["work"] / "run-1").symlink_to(bed["victim_dir"])
    refusal = _outcome(bed, lambda: suite._open_run_dir(bed["work"], "run-1", NOBODY).close())
    assert refusal is not None and "symbolic link" in refusal, refusal


def test_a_work_dir_reached_through_a_link_is_refused(bed: dict[str, Path]) -> None:
    link = bed["work"].parent / "link"
    link.symlink_to(bed["victim_dir"])
    with pytest.raises(SmokeSetupError, match=f"{link} is a symbolic link"):
        suite._open_run_dir(link / "training", "run-1", NOBODY)
    assert sorted(os.listdir(bed["victim_dir"])) == ["inside"]


def test_a_work_dir_below_another_users_directory_is_refused(bed: dict[str, Path]) -> None:
    foreign = bed["work"].parent / "foreign"
    foreign.mkdir()
    os.chown(foreign, OTHER_UID, OTHER_UID)
    with pytest.raises(SmokeSetupError, match=f"{foreign} is owned by uid {OTHER_UID}"):
        suite._open_run_dir(foreign / "training", "run-1", NOBODY)
    assert not (foreign / "training").exists()


def _swap_after_mkdir(monkeypatch: pytest.MonkeyPatch, swap: Callable[[str, int], None]) -> None:
    """The user's move between root's mkdir and what follows it: ``swap(name, dir_fd)``."""
    real_mkdir = os.mkdir

    def mkdir_then_swap(name: Any, mode: int = 0o777, *, dir_fd: int | None = None) -> None:
        real_mkdir(name, mode, dir_fd=dir_fd)
        if dir_fd is not None:
            swap(name, dir_fd)

    monkeypatch.setattr(os, "mkdir", mkdir_then_swap)


def test_a_new_directory_swapped_for_a_link_is_not_chowned_through_it(
    bed: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def to_link(name: str, dir_fd: int) -> None:
        os.rename(name, f"{name}.moved", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.symlink(bed["victim_dir"], name, dir_fd=dir_fd)

    _swap_after_mkdir(monkeypatch, to_link)
    refusal = _outcome(bed, lambda: suite._open_run_dir(bed["work"], "run-1", NOBODY).close())
    assert refusal is not None and "symbolic link" in refusal, refusal


def test_a_new_directory_swapped_for_another_directory_is_not_chowned(
    bed: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stands for a directory the user could not make: root's, with content (only root can
    stage this swap, which is the point: even then nothing is handed over)."""

    def to_victim(name: str, dir_fd: int) -> None:
        os.rename(name, f"{name}.moved", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        os.rename(bed["victim_dir"], bed["work"] / name)

    _swap_after_mkdir(monkeypatch, to_victim)
    moved = bed["work"] / "run-1"
    with pytest.raises(SmokeSetupError, match="replaced while it was being created"):
        suite._open_run_dir(bed["work"], "run-1", NOBODY)
    assert _snapshot(moved) == (0, 0, 0o700, ["inside"])


def test_a_new_directory_the_file_system_stores_as_the_user_is_taken(
    bed: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """sshfs stores every file as its login's account, NFS with all_squash as one account: root's
    new run directory comes out the user's. Still empty and 0700, it is the one just made."""

    def as_the_user(name: str, dir_fd: int) -> None:
        os.chown(name, NOBODY.uid, NOBODY.gid, dir_fd=dir_fd)

    _swap_after_mkdir(monkeypatch, as_the_user)
    suite._open_run_dir(bed["work"], "run-1", NOBODY).close()
    made = (bed["work"] / "run-1").stat()
    assert (made.st_uid, stat.S_IMODE(made.st_mode)) == (NOBODY.uid, 0o755)


@pytest.fixture
def ctx(bed: dict[str, Path]) -> Iterator[CheckContext]:
    run_home = suite._open_run_dir(bed["work"], "run-1", NOBODY)
    context = CheckContext(None, None, "1", run_home, bed["work"], {})  # type: ignore[arg-type]
    yield context
    run_home.close()


def test_a_check_dir_planted_as_a_link_is_refused(bed: dict[str, Path], ctx: CheckContext) -> None:
    (ctx.run_dir / "job-array").symlink_to(bed["victim_dir"])
    refusal = _outcome(bed, lambda: ctx.check_dir("job-array"))
    assert refusal is not None and "symbolic link" in refusal, refusal


def test_a_job_script_planted_as_a_link_is_replaced_not_written_through(
    bed: dict[str, Path], ctx: CheckContext
) -> None:
    work = ctx.check_dir("dependency")
    (work / "ok.sh").symlink_to(bed["victim_file"])
    assert _outcome(bed, lambda: ctx.write_script("dependency", "ok.sh", "#!/bin/bash\ntrue\n")) is None
    assert not (work / "ok.sh").is_symlink()
    assert (work / "ok.sh").read_text() == "#!/bin/bash\ntrue\n"
    assert stat.S_IMODE((work / "ok.sh").stat().st_mode) == 0o755


def test_training_scripts_are_copied_beside_the_users_links(
    bed: dict[str, Path], ctx: CheckContext, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    (source / "lib").mkdir(parents=True)
    (source / "launch.sh").write_text("#!/bin/bash\n")
    (source / "launch.sh").chmod(0o755)
    (source / "lib" / "train.py").write_text("print()\n")
    training = ctx.run_dir / "training"
    training.mkdir()
    os.chown(training, NOBODY.uid, NOBODY.gid)
    (training / "launch.sh").symlink_to(bed["victim_file"])
    (training / "lib").symlink_to(bed["victim_dir"])
    refusal = _outcome(bed, lambda: suite._copy_training(source, ctx.run_home))
    assert refusal is not None and "lib is a symbolic link" in refusal, refusal
    assert not (training / "launch.sh").is_symlink()
    assert stat.S_IMODE((training / "launch.sh").stat().st_mode) == 0o755


def test_the_report_planted_as_a_link_is_replaced_not_written_through(
    bed: dict[str, Path], ctx: CheckContext
) -> None:
    (ctx.run_dir / "report.json").symlink_to(bed["victim_file"])
    assert _outcome(bed, lambda: ctx.run_home.write_file("report.json", b"{}\n")) is None
    assert (ctx.run_dir / "report.json").read_bytes() == b"{}\n"


def test_write_json_does_not_write_through_a_planted_temporary_file(bed: dict[str, Path]) -> None:
    """The old temporary name was predictable (``.NAME.PID.tmp``): a link there was written through."""
    target = bed["work"] / "smoke.json"
    (bed["work"] / f".smoke.json.{os.getpid()}.tmp").symlink_to(bed["victim_file"])
    report = SmokeReport([], "2026-11-24T00:00:00+00:00", 0.0, {}, str(bed["work"]))
    assert _outcome(bed, lambda: write_json(report, target)) is None
    assert target.is_file() and not target.is_symlink()


def test_only_single_entries_are_written(bed: dict[str, Path]) -> None:
    with UserDir.open_work_dir(bed["work"], NOBODY) as work, pytest.raises(ValueError):
        userdir.write_file_at(work.fd, "../victim-file", b"x")


def test_a_job_output_planted_as_a_link_is_not_read_into_the_report(bed: dict[str, Path]) -> None:
    """Reading a planted link to a root-only file would copy it into report.json (0644, the user's)."""
    output = bed["work"] / "slurm-7.out"
    output.symlink_to(bed["victim_file"])
    assert VICTIM_TEXT.decode().strip() not in read_excerpt(output)
    assert read_json(output) is None
    (bed["work"] / "ddp-7.json").symlink_to(bed["victim_file"])
    bed["victim_file"].write_text('{"loss_decreased": true}')
    assert read_json(bed["work"] / "ddp-7.json") is None


def test_a_job_output_planted_as_a_fifo_does_not_block_the_runner(bed: dict[str, Path]) -> None:
    output = bed["work"] / "slurm-8.out"
    os.mkfifo(output)
    assert "not a regular file" in read_excerpt(output)
    with pytest.raises(OSError, match="not a regular file"):
        read_job_text(output)
