"""Files of the site's that the control node reads and checks once, before any host is touched:
credentials (the LDAP bind password, an alert webhook's URL), each on one line of a private file
of the deploying user's, and PEM certificates. What they hold goes to the hosts only through
cluster-cli's 0600 files and is never shown."""

from __future__ import annotations

import os
import stat
from pathlib import Path

PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"


class SiteFileError(ValueError):
    """A file of the site's is missing, unsafe or not what it should be."""


def read_private_line(path: Path, what: str) -> str:
    """The one line of ``path``, which must be a regular file of this user, unreadable by others;
    ``what`` names its content in a refusal ("the bind password")."""
    try:
        status = path.lstat()
    except FileNotFoundError:
        raise SiteFileError(f"{path} does not exist: put {what} there (one line, chmod 600)") from None
    if not stat.S_ISREG(status.st_mode):
        raise SiteFileError(f"{path} is not a regular file (a symbolic link or something else)")
    if status.st_uid != os.getuid():
        raise SiteFileError(f"{path} is owned by uid {status.st_uid}, not by this user ({os.getuid()})")
    if stat.S_IMODE(status.st_mode) & 0o077:
        raise SiteFileError(f"{path} is readable by others (mode {stat.S_IMODE(status.st_mode):04o}): chmod 600 it")
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != 1 or not lines[0] or not lines[0].isprintable():
        raise SiteFileError(f"{path} must hold {what} on one line, without control characters")
    return lines[0]


def read_ca(path: Path) -> str:
    """The PEM certificates of ``path``."""
    try:
        text = path.expanduser().read_text(encoding="ascii")
    except FileNotFoundError:
        raise SiteFileError(f"{path} does not exist") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SiteFileError(f"{path} cannot be read as a PEM file: {error}") from None
    if PEM_CERTIFICATE not in text:
        raise SiteFileError(f"{path} holds no PEM certificate ({PEM_CERTIFICATE})")
    return text


def read_webhook_url(path: Path) -> str:
    """The webhook URL of ``path`` (read_private_line's checks), http:// or https://."""
    url = read_private_line(path, "the webhook's URL")
    if not url.startswith(("http://", "https://")) or any(char.isspace() for char in url):
        raise SiteFileError(f"{path} must hold an http:// or https:// URL without spaces")
    return url
