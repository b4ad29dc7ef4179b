"""Generated secrets: the munge key and the database password, kept 0600 on the control node.

They are created once and reused on every later run, so re-deploys change nothing. Their
values are never printed or logged; callers get paths and opaque values.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from collections.abc import Callable
from pathlib import Path

from cluster_cli.errors import ClusterCliError, RefusedError

MUNGE_KEY_BYTES = 1024
MUNGE_KEY_FILE = "munge.key"
DB_PASSWORD_FILE = "slurmdbd_password"


@dataclass(frozen=True)
class ClusterSecrets:
    directory: Path
    munge_key_path: Path
    db_password_path: Path

    def db_password(self) -> str:
        return self.db_password_path.read_text(encoding="ascii").strip()

    def __repr__(self) -> str:  # never show values, only where they live
        return f"ClusterSecrets(directory={str(self.directory)!r})"


def _write_private(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(descriptor, data)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temporary, path)


def _check_ours(path: Path, kind: str, is_kind: Callable[[int], bool]) -> None:
    """Refuse a secret file or directory that is a symbolic link, not a ``kind``, or another
    user's: its contents would reach every host."""
    status = path.lstat()
    if stat.S_ISLNK(status.st_mode) or not is_kind(status.st_mode):
        raise RefusedError(f"{path}: not a {kind} (a symbolic link or something else); not using it")
    if status.st_uid != os.getuid():
        raise RefusedError(f"{path}: owned by uid {status.st_uid}, not by this user ({os.getuid()}); not using it")


def _check_existing(directory: Path) -> None:
    _check_ours(directory, "directory", stat.S_ISDIR)
    for name in (MUNGE_KEY_FILE, DB_PASSWORD_FILE):
        if os.path.lexists(directory / name):
            _check_ours(directory / name, "regular file", stat.S_ISREG)


def _check_private(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, 0o600)


def _refuse_home(directory: Path) -> None:
    if directory.absolute() == Path.home().absolute():
        raise RefusedError(f"{directory}: the home directory cannot be the secrets directory")


def backup_name(name: str, stamp: str) -> str:
    """The file a rotation keeps the secret ``name`` in: ``munge.key.STAMP.old``."""
    return f"{name}.{stamp}.old"


def _move_aside(directory: Path, stamp: str) -> list[Path]:
    moves = [(directory / name, directory / backup_name(name, stamp))
             for name in (MUNGE_KEY_FILE, DB_PASSWORD_FILE) if (directory / name).exists()]
    for _, backup in moves:  # all checked before any is moved: a refusal leaves every secret in place
        if os.path.lexists(backup):
            raise RefusedError(f"{backup}: exists already; not overwriting a backup (try again in a second)")
    for current, backup in moves:
        os.chmod(current, 0o600)
        os.rename(current, backup)  # the same bytes, never copied: still 0600, still only ours
    return [backup for _, backup in moves]


def rotate_secrets(directory: Path, stamp: str) -> tuple[ClusterSecrets, tuple[Path, ...]]:
    """Keep the current secrets as 0600 ``NAME.STAMP.old`` files in ``directory``, make new ones,
    and return where both are (paths only: the values are never returned or shown)."""
    _refuse_home(directory)
    backups: list[Path] = []
    if directory.exists():
        try:
            _check_existing(directory)
            backups = _move_aside(directory, stamp)
        except OSError as error:
            raise ClusterCliError(f"secrets directory {directory}: {error.strerror}") from None
    return ensure_secrets(directory), tuple(backups)


def ensure_secrets(directory: Path) -> ClusterSecrets:
    """Create missing secrets (never replacing existing ones) and return where they are."""
    _refuse_home(directory)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check_existing(directory)
        os.chmod(directory, 0o700)
        munge_key = directory / MUNGE_KEY_FILE
        if not munge_key.exists():
            _write_private(munge_key, secrets.token_bytes(MUNGE_KEY_BYTES))
        password = directory / DB_PASSWORD_FILE
        if not password.exists():
            # letters, digits, '-' and '_' only: slurmdbd.conf cannot quote '#' or spaces
            _write_private(password, (secrets.token_urlsafe(32) + "\n").encode("ascii"))
        for path in (munge_key, password):
            _check_private(path)
        if munge_key.stat().st_size < 32:
            raise ClusterCliError(f"{munge_key}: munge key is shorter than 32 bytes; remove it to regenerate")
    except OSError as error:
        raise ClusterCliError(f"secrets directory {directory}: {error.strerror}") from None
    return ClusterSecrets(directory, munge_key, password)
