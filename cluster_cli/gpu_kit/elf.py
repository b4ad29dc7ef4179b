"""What an ELF file needs from the machine it runs on, read with binutils' ``readelf``; and the
one change the kit makes to its programs (``patchelf --set-rpath``, so they find the kit's own
libraries and no environment variable leaks into the jobs they start)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from cluster_cli.errors import ClusterCliError

ELF_MAGIC = b"\x7fELF"
_NEEDED = re.compile(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]")
_GLIBC = re.compile(r"GLIBC_(\d+)\.(\d+)(?:\.(\d+))?")
#: The C library's own objects: always the machine's (the kit never carries them).
GLIBC_SONAMES = frozenset({
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2",
    "libutil.so.1", "libcrypt.so.1", "libanl.so.1", "ld-linux-x86-64.so.2", "libmvec.so.1",
    "libnsl.so.1",
})  # fmt: skip


class ElfToolError(ClusterCliError):
    """readelf or patchelf failed, or is missing."""


def is_elf(path: Path) -> bool:
    if not path.is_file() or path.is_symlink():
        return False
    with path.open("rb") as handle:
        return handle.read(4) == ELF_MAGIC


def _readelf(*args: str) -> str:
    try:
        done = subprocess.run(["readelf", "--wide", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError as error:
        raise ElfToolError("readelf is missing (apt-get install binutils)") from error
    if done.returncode != 0:
        raise ElfToolError(f"readelf {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def needed(path: Path) -> list[str]:
    """The sonames ``path`` links against (DT_NEEDED), in order."""
    return _NEEDED.findall(_readelf("--dynamic", str(path)))


def glibc_floor(path: Path) -> tuple[int, int]:
    """The newest GLIBC_x.y symbol version ``path`` asks for: the oldest C library it runs on."""
    versions = [(int(major), int(minor)) for major, minor, _ in _GLIBC.findall(_readelf("--version-info", str(path)))]
    return max(versions, default=(2, 2))


def set_runpath(path: Path, runpath: str) -> None:
    try:
        done = subprocess.run(
            ["patchelf", "--set-rpath", runpath, str(path)], capture_output=True, text=True, check=False
        )
    except FileNotFoundError as error:
        raise ElfToolError("patchelf is missing (apt-get install patchelf)") from error
    if done.returncode != 0:
        raise ElfToolError(f"patchelf {path}: {done.stderr.strip()}")
