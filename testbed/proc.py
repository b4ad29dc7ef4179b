"""Subprocess helpers: argv lists only, never a shell."""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

log = logging.getLogger("testbed")


class TestbedError(RuntimeError):
    """Any failure of the test bed machinery (a command, a timeout, bad state)."""

    __test__ = False  # not a pytest test class


class CommandError(TestbedError):
    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        tail = (stderr or stdout).strip().splitlines()[-15:]
        super().__init__(
            f"command failed (rc={returncode}): {' '.join(self.argv)}\n" + "\n".join(tail)
        )


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    capture: bool = True,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (a list, no shell) and return the completed process.

    Raises CommandError on a non-zero exit when ``check`` is true.
    """
    argv = [str(a) for a in argv]
    log.debug("run: %s", argv)
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    try:
        cp = subprocess.run(
            argv,
            check=False,
            text=True,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE if capture else None,
            stdin=subprocess.DEVNULL if input_text is None else None,
            input=input_text,
            timeout=timeout,
            env=full_env,
            cwd=str(cwd) if cwd else None,
        )
    except subprocess.TimeoutExpired as exc:
        raise TestbedError(f"command timed out after {timeout}s: {' '.join(argv)}") from exc
    except FileNotFoundError as exc:
        raise TestbedError(f"command not found: {argv[0]}") from exc
    if check and cp.returncode != 0:
        raise CommandError(argv, cp.returncode, cp.stdout or "", cp.stderr or "")
    return cp


class Timer:
    """Context manager measuring wall-clock seconds."""

    def __init__(self) -> None:
        self.start = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Self:
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.monotonic() - self.start


# ---------------------------------------------------------------- processes

def proc_starttime(pid: int) -> int | None:
    """Start time (clock ticks since boot) of ``pid``, or None if it is gone.

    Together with the pid this identifies a process: a recycled pid has a
    different start time, so we never signal a process we did not start.
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm may contain spaces and parentheses: split after the last ')'
    fields = raw[raw.rfind(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def same_process(pid: int | None, starttime: int | None) -> bool:
    """True when ``pid`` is alive and is the very process recorded earlier."""
    if not pid or starttime is None:
        return False
    return proc_starttime(pid) == starttime


def reap(pid: int) -> None:
    """Collect ``pid`` if it is our own exited child (no-op otherwise)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def children(pid: int) -> list[int]:
    out: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tasks = list(task_dir.iterdir())
    except FileNotFoundError:
        return out
    for t in tasks:
        try:
            out.extend(int(x) for x in (t / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def descendants(pid: int) -> list[int]:
    seen: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for c in children(p):
            if c not in seen:
                seen.append(c)
                todo.append(c)
    return seen


def ns_pids(pid: int) -> list[int]:
    """The NSpid line of /proc/PID/status: the pid in each nested pid namespace."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return [int(x) for x in line.split()[1:]]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return []
