"""Root's writes into the test user's work directory, safe against the user's symlinks and swaps.

The work directory (``SmokeTarget.work_dir``) belongs to the test user, who may replace any
entry in it with a symbolic link or another directory at any moment, also between two steps of
the runner. So the runner never hands a path below it to a path-resolving call as root:

- ``UserDir.open_work_dir`` walks from ``/`` one component at a time with
  ``O_DIRECTORY|O_NOFOLLOW`` relative to the directory opened before (``dir_fd``), and refuses
  a component that is a symbolic link or is owned by anyone but root and the test user;
- every later operation names a single entry relative to a held directory descriptor and never
  follows a link: ``mkdir`` then ``open(O_NOFOLLOW)``, and ``fchown``/``fchmod`` only on a
  descriptor whose ``fstat`` shows the fresh, empty 0700 root directory just made (a swapped-in
  directory cannot look like that: the user could not have moved one there); files are created
  with ``O_CREAT|O_EXCL|O_NOFOLLOW`` under a random name, written, ``fchmod``-ed, then renamed
  into place within the same directory (a rename replaces a symbolic link, never its target).

Whatever the user swaps, root acts only on inodes it opened or made itself, inside directories
the user could already write to: nothing outside the work directory is created, chowned,
chmodded or overwritten.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from types import TracebackType

from cluster_cli.smoke.suite_errors import SmokeSetupError
from cluster_cli.smoke.slurm import User
from typing import Self

DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
FRESH_MODE = 0o700


class UserDir:
    """A directory held open; every operation below it is relative to the descriptor."""

    def __init__(self, fd: int, path: Path, user: User) -> None:
        self.fd = fd
        self.path = path
        self.user = user

    @classmethod
    def open_work_dir(cls, path: Path, user: User) -> UserDir:
        """Open ``path`` (an absolute path), creating what is missing: parents root's 0755, the
        leaf the user's. SmokeSetupError for a symbolic link or another user's component."""
        if not path.is_absolute() or ".." in path.parts:
            raise SmokeSetupError(f"the work directory {path} must be an absolute path without '..'")
        current = cls(os.open("/", DIRECTORY_FLAGS), Path("/"), user)
        for index, name in enumerate(path.parts[1:], start=2):
            with current:
                current = current.child(name, hand_to_user=index == len(path.parts))
        return current

    def child(self, name: str, hand_to_user: bool = True) -> UserDir:
        """The subdirectory ``name``, opened without following links; created when missing
        (0755, handed to the user unless ``hand_to_user`` is false)."""
        shown = self.path / name
        try:
            fd = os.open(name, DIRECTORY_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            return UserDir(self._make_dir(name, hand_to_user), shown, self.user)
        except OSError as error:
            raise self._refusal(name, error) from None
        try:
            _check_owner(fd, shown, self.user)
        except BaseException:
            os.close(fd)
            raise
        return UserDir(fd, shown, self.user)

    def write_file(self, name: str, data: bytes, mode: int = 0o644) -> Path:
        """Write ``name`` (root's, ``mode``) atomically: a new file under a random name, renamed."""
        write_file_at(self.fd, name, data, mode)
        return self.path / name

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _make_dir(self, name: str, hand_to_user: bool) -> int:
        shown = self.path / name
        try:
            os.mkdir(name, FRESH_MODE, dir_fd=self.fd)
            fd = os.open(name, DIRECTORY_FLAGS, dir_fd=self.fd)
        except OSError as error:
            raise self._refusal(name, error) from None
        try:
            info = os.fstat(fd)
            # Ours: this process's, or, on a network file system that stores every file as one
            # account (sshfs's login, NFS's all_squash), the user's it goes to anyway; empty (some
            # file systems count a directory's links as 1, so the listing, not st_nlink, says so).
            fresh = info.st_uid in (os.geteuid(), self.user.uid) and stat.S_IMODE(info.st_mode) == FRESH_MODE
            if not fresh or os.listdir(fd):
                raise SmokeSetupError(f"{shown} was replaced while it was being created; refusing to use it")
            if hand_to_user and os.geteuid() == 0:
                os.fchown(fd, self.user.uid, self.user.gid)
            os.fchmod(fd, 0o755)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _refusal(self, name: str, error: OSError) -> SmokeSetupError:
        shown = self.path / name
        try:
            is_link = stat.S_ISLNK(os.lstat(name, dir_fd=self.fd).st_mode)
        except OSError:
            is_link = False
        if is_link or error.errno == errno.ELOOP:
            return SmokeSetupError(f"{shown} is a symbolic link; the smoke runner follows none in its work directory")
        return SmokeSetupError(f"cannot use {shown} as a directory: {error.strerror}")


def _check_owner(fd: int, shown: Path, user: User) -> None:
    owner = os.fstat(fd).st_uid
    if owner not in (0, user.uid):
        raise SmokeSetupError(
            f"{shown} is owned by uid {owner}, neither root nor the test user {user.name!r}; "
            "refusing a work directory another user can change"
        )


def write_file_at(dir_fd: int, name: str, data: bytes, mode: int = 0o644) -> None:
    """Atomically write ``name`` in the directory ``dir_fd``: the data goes to a new file
    (``O_CREAT|O_EXCL|O_NOFOLLOW``, random name), which then replaces ``name``."""
    if "/" in name or name in ("", ".", ".."):
        raise ValueError(f"not a single directory entry: {name!r}")
    temporary = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temporary, NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)
        os.fchmod(fd, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=dir_fd)
        raise
    finally:
        os.close(fd)
    os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
