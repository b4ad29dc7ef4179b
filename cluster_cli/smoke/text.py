"""Text helpers for job output: the tail, and the excerpt a reader of a failure needs."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

# A file a job wrote in the test user's work directory, read as root: a link at its name is not
# followed (one planted to a root-only file would put that file into the report), and a FIFO
# planted there does not block the open.
JOB_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


HEAD_LINES = 12
ROOT_CAUSE = "Root Cause (first observed failure):"


def excerpt(text: str, lines: int = 40) -> str:
    """What a reader needs from a failed job's output, in at most ~lines + 35 lines.

    The tail alone is not enough for torchrun jobs: every agent prints its own ChildFailedError
    traceback at the end, pushing the worker's real error (near the top) and torchrun's
    "Root Cause" block (rank, host, exit code, the worker's traceback under @record) out of view.
    So: the first lines, the first Root Cause block, then the tail, with gaps marked.
    """
    all_lines = text.rstrip().splitlines()
    if len(all_lines) <= HEAD_LINES + lines:
        return "\n".join(all_lines)
    tail_start = len(all_lines) - lines
    parts = [all_lines[:HEAD_LINES]]
    cause = next((i for i, line in enumerate(all_lines) if ROOT_CAUSE in line), None)
    if cause is not None and HEAD_LINES <= cause < tail_start:
        block = all_lines[cause : cause + 30]
        end = next((i for i, line in enumerate(block) if i and line.startswith("=====")), len(block) - 1)
        parts.append(block[: end + 1])
    parts.append(all_lines[tail_start:])
    return "\n[...]\n".join("\n".join(part) for part in parts)


def open_job_file(path: Path) -> BinaryIO:
    """Open a job's file for reading: regular files only, the last component not followed."""
    fd = os.open(path, JOB_FILE_FLAGS)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def read_job_text(path: Path) -> str:
    with open_job_file(path) as handle:
        return handle.read().decode(errors="replace")


def read_excerpt(path: Path, lines: int = 40) -> str:
    """``excerpt`` of a job output file (its first 256 KiB and last 64 KiB)."""
    try:
        with open_job_file(path) as handle:
            head = handle.read(256 * 1024)
            size = handle.seek(0, os.SEEK_END)
            if size > len(head):
                handle.seek(max(len(head), size - 64 * 1024))
                head += b"\n[...]\n" + handle.read()
    except OSError as error:
        return f"(no output: {error.strerror}: {path})"
    return excerpt(head.decode(errors="replace"), lines)
