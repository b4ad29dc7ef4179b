"""Slurm client commands run as the test user: argv lists only, never a shell; jobs are polled.

Submission is ``sbatch --parsable``; completion is found by polling ``scontrol show job`` (and
``sacct`` once the controller has forgotten the job), never ``sbatch --wait``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cluster_cli.node_states import parse_scontrol_record
from cluster_cli.smoke.suite_errors import CheckTimeout, SmokeSetupError
from cluster_cli.smoke.text import tail

TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
        "SPECIAL_EXIT",
    }
)
STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def lookup(cls, name: str) -> User:
        entry = pwd.getpwnam(name)
        return cls(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


@dataclass
class Completed:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return (self.stdout + ("\n" if self.stdout and self.stderr else "") + self.stderr).strip()


@dataclass
class JobInfo:
    """The fields of ``scontrol show job -o`` (one dict per array task), or of sacct as a fallback."""

    job_id: str
    records: list[dict[str, str]] = field(default_factory=list)
    source: str = "scontrol"

    @property
    def states(self) -> list[str]:
        return [record.get("JobState", "UNKNOWN").split()[0] for record in self.records]

    @property
    def state(self) -> str:
        return self.states[0] if self.records else "UNKNOWN"

    @property
    def finished(self) -> bool:
        return bool(self.records) and all(state in TERMINAL_STATES for state in self.states)

    @property
    def restarts(self) -> int:
        return int(self.records[0].get("Restarts", "0")) if self.records else 0

    @property
    def exit_code(self) -> str:
        return self.records[0].get("ExitCode", "?") if self.records else "?"

    def get(self, key: str, default: str = "") -> str:
        return self.records[0].get(key, default) if self.records else default


def client_environment(
    user: User, slurm_conf: Path | None, extra: Mapping[str, str] | None
) -> dict[str, str]:
    """A clean environment for the Slurm client commands as ``user`` (nothing of the caller's)."""
    path = STANDARD_PATH
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise SmokeSetupError("the Slurm client commands (sbatch, srun, scontrol) are not on PATH")
    if str(Path(sbatch).parent) not in path.split(":"):
        path = f"{Path(sbatch).parent}:{path}"
    env = {
        "PATH": path,
        "HOME": user.home if os.path.isdir(user.home) else "/tmp",
        "USER": user.name,
        "LOGNAME": user.name,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    if slurm_conf is not None:
        env["SLURM_CONF"] = str(slurm_conf)
    env.update(extra or {})
    return env


class UserProcesses:
    """Runs commands as ``user`` (switching to it when running as root), each in its own session."""

    def __init__(self, user: User, env: dict[str, str]) -> None:
        self.user = user
        self.env = env
        # Where commands run (and so the jobs' working directory): the run directory once known,
        # never the caller's own directory, which the test user may not be able to enter.
        self.cwd: Path | None = None
        self._switch_user = os.geteuid() != user.uid
        if self._switch_user and os.geteuid() != 0:
            raise SmokeSetupError(
                f"running as uid {os.geteuid()}: run the smoke suite as root or as the test user {user.name!r}"
            )

    def popen_kwargs(self) -> dict[str, object]:
        kwargs: dict[str, object] = {"env": dict(self.env), "start_new_session": True}
        if self._switch_user:
            kwargs.update(user=self.user.uid, group=self.user.gid, extra_groups=[])
        return kwargs

    def run(
        self,
        argv: Sequence[str],
        timeout: float,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        as_caller: bool = False,
    ) -> Completed:
        """Run to completion; on timeout interrupt (srun cancels its step on SIGINT) then kill.
        ``as_caller``: as the suite's own user (root), for a read-only query whose answer
        PrivateData hides from the test user (the accounts' rows of sshare)."""
        kwargs = self.popen_kwargs()
        if as_caller:
            for key in ("user", "group", "extra_groups"):
                kwargs.pop(key, None)
        if env:
            kwargs["env"] = {**self.env, **env}
        start = time.monotonic()
        process = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=cwd or self.cwd,
            **kwargs,  # type: ignore[call-overload]
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process_group(process)
            stdout, stderr = process.communicate()
            raise CheckTimeout(
                f"{' '.join(argv)} did not finish within {timeout:.0f}s; output so far:\n"
                + tail(f"{stdout}\n{stderr}", 20)
            ) from None
        return Completed(list(argv), process.returncode, stdout, stderr, time.monotonic() - start)


class SlurmSession(UserProcesses):
    """The Slurm client commands as the test user: submit, poll, cancel, node states, config."""

    def __init__(
        self,
        user: User,
        slurm_conf: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        job_args: Sequence[str] = (),
        partition: str | None = None,
        accounting: bool = False,
    ) -> None:
        super().__init__(user, client_environment(user, slurm_conf, extra_env))
        self.slurm_conf = slurm_conf
        # Options for every sbatch/srun/salloc: the partition and the target's extras.
        self.job_args = list(job_args) + ([f"--partition={partition}"] if partition else [])
        self.accounting = accounting

    def sbatch(
        self, args: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 30
    ) -> str:
        """Submit with --parsable; returns the job id (without the cluster suffix)."""
        done = self.run(["sbatch", "--parsable", *args], timeout=timeout, cwd=cwd, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"sbatch failed (exit {done.returncode}): {done.output}")
        return done.stdout.strip().split(";")[0]

    def job_info(self, job_id: str) -> JobInfo:
        done = self.run(["scontrol", "show", "job", "-o", job_id], timeout=30)
        if done.returncode == 0 and done.stdout.strip():
            return JobInfo(
                job_id, [parse_scontrol_record(line) for line in done.stdout.splitlines() if line.strip()]
            )
        if self.accounting:
            return self._sacct_info(job_id)
        return JobInfo(job_id, [], source="none")

    def _sacct_info(self, job_id: str) -> JobInfo:
        fields = ["JobID", "JobName", "State", "ExitCode", "Restarts", "Start", "End", "NodeList"]
        keys = ["JobId", "JobName", "JobState", "ExitCode", "Restarts", "StartTime", "EndTime", "NodeList"]
        done = self.run(["sacct", "-X", "-n", "-P", "-j", job_id, f"--format={','.join(fields)}"], timeout=30)
        records = [
            dict(zip(keys, line.split("|"), strict=False)) for line in done.stdout.splitlines() if line
        ]
        return JobInfo(job_id, records, source="sacct")

    def wait(
        self,
        job_id: str,
        timeout: float,
        until: Callable[[JobInfo], bool] | None = None,
        on_poll: Callable[[JobInfo], None] | None = None,
    ) -> JobInfo:
        """Poll until the job (every array task) reaches a terminal state, or ``until`` holds."""
        deadline = time.monotonic() + timeout
        interval = 0.2
        missing_since: float | None = None
        while True:
            try:
                info = self.job_info(job_id)
            except CheckTimeout as error:
                # A controller slow to answer one poll on a loaded machine is no news about the
                # job; only the check's own deadline ends the wait.
                if time.monotonic() > deadline:
                    self.cancel(job_id)
                    message = f"job {job_id}: no answer within {timeout:.0f}s; cancelled it\n{error}"
                    raise CheckTimeout(message) from None
                continue
            if on_poll is not None:
                on_poll(info)
            if until is not None and until(info):
                return info
            if until is None and info.finished:
                return info
            if not info.records:
                # Gone from the controller (MinJobAge passed) with no accounting to ask.
                missing_since = missing_since or time.monotonic()
                if time.monotonic() - missing_since > 10:
                    return info
            if time.monotonic() > deadline:
                self.cancel(job_id)
                raise CheckTimeout(f"job {job_id} still {info.state} after {timeout:.0f}s; cancelled it")
            time.sleep(interval)
            interval = min(interval * 1.5, 1.0)

    def cancel(self, job_id: str, signal_name: str | None = None, batch_only: bool = False) -> Completed:
        argv = ["scancel"]
        if signal_name:
            argv.append(f"--signal={signal_name}")
        if batch_only:
            argv.append("--batch")
        return self.run([*argv, job_id], timeout=30)

    def cancel_by_name_prefix(self, prefix: str) -> None:
        """Cancel every job of the test user whose name starts with ``prefix`` (cleanup after a run)."""
        done = self.run(["squeue", "-h", "-u", self.user.name, "-o", "%i %j"], timeout=30)
        for line in done.stdout.splitlines():
            parts = line.split(maxsplit=1)
            if len(parts) == 2 and parts[1].startswith(prefix):
                self.cancel(parts[0].split("_")[0])

    def node_states(self, nodes: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``sinfo -N``: node -> (state with flags, reason) for those of ``nodes`` Slurm knows.

        One listing of every node, filtered here: never ``sinfo -n`` of one node, which slurmctld
        answers from cached allocated-CPU counts that can call an idle node "mixed" for minutes
        after a slurmctld start (docs/operations.md, "Nodes allocated with no job")."""
        done = self.run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"], timeout=30)
        wanted = set(nodes)
        states: dict[str, tuple[str, str]] = {}
        for line in done.stdout.splitlines():
            name, _, rest = line.partition("|")
            state, _, reason = rest.partition("|")
            # A node in several partitions is listed once per partition; any line will do.
            if name.strip() in wanted:
                states.setdefault(name.strip(), (state.strip().lower(), reason.strip()))
        return states

    def show_config(self) -> dict[str, str]:
        """``scontrol show config`` as a dict; SmokeSetupError when the controller cannot be reached."""
        done = self.run(["scontrol", "show", "config"], timeout=30)
        if done.returncode != 0:
            raise SmokeSetupError(f"cannot reach slurmctld: {tail(done.output, 5)}")
        config: dict[str, str] = {}
        for line in done.stdout.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                config[key.strip()] = value.strip()
        return config


def stop_process_group(process: subprocess.Popen[str]) -> None:
    """SIGINT twice (srun/salloc cancel their step/allocation), then SIGKILL the whole group."""
    for sig, wait_s in ((signal.SIGINT, 0.5), (signal.SIGINT, 3.0), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
