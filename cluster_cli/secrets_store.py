"""Generated secrets: the munge key and the database password, kept 0600 on the control node.

They are created once and reused on every later run, so re-deploys change nothing. Their
values are never printed or logged; callers get paths and opaque values.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from cluster_cli.errors import ClusterCliError

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


def _check_private(path: Path) -> None:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, 0o600)


def ensure_secrets(directory: Path) -> ClusterSecrets:
    """Create missing secrets (never replacing existing ones) and return where they are."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
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
