"""Per-worker CPU of an ansible-playbook run, for benchmarks/worker_cost.py (not used otherwise).

Python imports this module at start-up in every process that has this directory on PYTHONPATH.
Only in ansible-playbook, and only with WORKER_COST_LOG set, it records into that file one JSON
line per worker process (one worker per task and host): the task, the host, the worker's own CPU
seconds (user + sys, from the fork to the end of its task) and its minor page faults; and, at
exit, one line with the main process's own CPU seconds.
"""

from __future__ import annotations

import os
import sys


def _append(record: dict[str, object]) -> None:
    import json

    line = (json.dumps(record) + "\n").encode()
    descriptor = os.open(os.environ["WORKER_COST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line)  # one write of a short line: whole even with workers beside it
    finally:
        os.close(descriptor)


def _usage() -> tuple[float, int]:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_minflt


def _install() -> None:
    import atexit

    from ansible.executor.process.worker import WorkerProcess

    run = WorkerProcess.run

    def measured_run(self: WorkerProcess) -> None:
        try:
            run(self)
        finally:
            cpu_s, faults = _usage()
            _append({"kind": "worker", "task": self._task.get_name(), "host": self._host.get_name(),
                     "cpu_s": cpu_s, "minor_faults": faults})

    WorkerProcess.run = measured_run
    main_pid = os.getpid()

    def main_exit() -> None:
        if os.getpid() == main_pid:  # not in the workers, which inherit this handler
            _append({"kind": "main", "cpu_s": _usage()[0]})

    atexit.register(main_exit)


if os.environ.get("WORKER_COST_LOG") and sys.argv and os.path.basename(sys.argv[0]) == "ansible-playbook":
    _install()
