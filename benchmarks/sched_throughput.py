"""Benchmark: scheduler throughput of a running cluster, 1,000 trivial jobs.

    sudo .venv/bin/python benchmarks/sched_throughput.py INVENTORY [--mem 1M | --no-mem] [--write]

Needs the deployed cluster of INVENTORY and root; submits as the inventory's
`training.test_user` (`runuser -u USER --`, SLURM_CONF of the inventory's `slurm.paths.conf_dir`):
one job array of 500 tasks and 500 single jobs, each `sbatch --wrap=true -n1 -t 1 -o /dev/null`
with `--mem=1M` (or no memory request with --no-mem, so the cluster's default memory decides how
many share a node), in the default partition unless --partition. It measures the submission rate,
and the time from the first submission until `squeue` shows none of them (polled, not
`sbatch --wait`), beside the CPU time of the client commands and of slurmctld. Jobs still there
after --timeout seconds are cancelled (`scancel --name`), and the run fails. sacct then counts the
jobs' end states (accounting on). --write replaces this inventory's and mode's subsection of
"Scheduler throughput" in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# deploy_local, devtools
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
from deploy_local import machine

from cluster_cli.loader import load_cluster
from devtools.markdown import replace_section

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "docs" / "benchmarks.md"
SECTION = "## Scheduler throughput: 1,000 trivial jobs"
ARRAY_TASKS = 500
SINGLE_JOBS = 500
GOAL_S = 60.0
POLL_S = 0.5


@dataclass(frozen=True)
class Result:
    jobs: int
    submit_s: float
    done_s: float  # from the first submission until squeue showed none of the jobs
    client_cpu_s: float
    slurmctld_cpu_s: float | None
    states: dict[str, int]

    @property
    def submit_rate(self) -> float:
        return self.jobs / self.submit_s

    @property
    def done_rate(self) -> float:
        return self.jobs / self.done_s


def job_id(parsable: str) -> str:
    """The job id of `sbatch --parsable` output (``123`` or ``123;cluster``)."""
    return parsable.strip().split(";", 1)[0]


def remaining(squeue_output: str) -> int:
    """Jobs and array tasks still queued or running, from `squeue -h -r -o %i`."""
    return sum(1 for line in squeue_output.splitlines() if line.strip())


def end_states(sacct_output: str) -> dict[str, int]:
    """State -> count, from `sacct -X -n -P -o JobID,State` (``CANCELLED by 0`` counts as CANCELLED)."""
    states = (line.split("|", 1)[1].split()[0] for line in sacct_output.splitlines() if "|" in line)
    return dict(sorted(Counter(states).items()))


def sbatch_options(name: str, mem: str | None, partition: str | None) -> list[str]:
    options = ["--parsable", f"--job-name={name}", "-n1", "-t", "1", "-o", "/dev/null", "--chdir=/tmp"]
    options += [f"--mem={mem}"] if mem else []
    options += [f"--partition={partition}"] if partition else []
    return [*options, "--wrap=true"]


class Client:
    """Slurm client commands as ``user`` with the cluster's slurm.conf."""

    def __init__(self, user: str, slurm_conf: str) -> None:
        self.prefix = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={slurm_conf}"]
        self.slurm_conf = slurm_conf

    def run(self, *command: str, as_root: bool = False, stdin: str | None = None) -> str:
        prefix = ["env", f"SLURM_CONF={self.slurm_conf}"] if as_root else self.prefix
        done = subprocess.run([*prefix, *command], input=stdin, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            what = " ".join(command[:2])
            raise RuntimeError(f"{what} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return done.stdout


def submit(client: Client, options: list[str], parallel: int) -> list[str]:
    """The array, then the single jobs, ``parallel`` sbatch at a time (one shell as the user)."""
    ids = [job_id(client.run("sbatch", f"--array=0-{ARRAY_TASKS - 1}", *options))]
    quoted = " ".join(f"'{option}'" for option in options)
    script = f"xargs -P {parallel} -I{{}} sbatch {quoted}"
    out = client.run("bash", "-c", script, stdin="\n".join(str(n) for n in range(SINGLE_JOBS)) + "\n")
    ids += [job_id(line) for line in out.splitlines() if line.strip()]
    if len(ids) != 1 + SINGLE_JOBS:
        raise RuntimeError(f"submitted {len(ids) - 1} single jobs of {SINGLE_JOBS}")
    return ids


def slurmctld_cpu_s(pid_file: Path) -> float | None:
    """utime + stime of slurmctld (from its pid file), None when it cannot be read."""
    try:
        fields = Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_until_done(client: Client, name: str, started: float, timeout: float) -> float:
    while True:
        left = remaining(client.run("squeue", "-h", "-r", f"--name={name}", "-o", "%i", as_root=True))
        elapsed = time.monotonic() - started
        if left == 0:
            return elapsed
        if elapsed > timeout:
            client.run("scancel", f"--name={name}", as_root=True)
            raise SystemExit(f"{left} jobs still queued or running after {timeout:.0f} s: cancelled them")
        time.sleep(POLL_S)


def count_states(client: Client, ids: list[str], jobs: int) -> dict[str, int]:
    """The end states sacct records, waited for up to 60 s (its records lag the jobs)."""
    states: dict[str, int] = {}
    for _ in range(120):
        states = end_states(client.run("sacct", "-X", "-n", "-P", "-j", ",".join(ids), "-o", "JobID,State",
                                       as_root=True))
        if sum(states.values()) >= jobs:
            break
        time.sleep(POLL_S)
    return states


def measure(client: Client, options: list[str], name: str, parallel: int, timeout: float,
            pid_file: Path) -> Result:
    ctld, cpu = slurmctld_cpu_s(pid_file), children_cpu_s()
    started = time.monotonic()
    try:
        ids = submit(client, options, parallel)
        submitted = time.monotonic() - started
        done = wait_until_done(client, name, started, timeout)
    except BaseException:
        client.run("scancel", f"--name={name}", as_root=True)
        raise
    ctld_after = slurmctld_cpu_s(pid_file)
    ctld_cpu = ctld_after - ctld if ctld is not None and ctld_after is not None else None
    jobs = ARRAY_TASKS + SINGLE_JOBS
    return Result(jobs, submitted, done, children_cpu_s() - cpu, ctld_cpu, count_states(client, ids, jobs))


def mode(mem: str | None) -> str:
    return f"--mem {mem}" if mem else "--no-mem"


def section(result: Result, inventory: str, mem: str | None, note: str, host: str) -> str:
    """The subsection of one run (one per memory mode, under SECTION)."""
    verdict = "meets" if result.done_s <= GOAL_S else "misses"
    ctld = f"{result.slurmctld_cpu_s:.1f} s" if result.slurmctld_cpu_s is not None else "not read"
    states = ", ".join(f"{count} {state}" for state, count in result.states.items()) or "none recorded"
    request = f"`--mem={mem}`" if mem else "no memory request (the cluster's default memory decides)"
    return "\n".join([
        f"### {inventory}, {mode(mem)}", "",
        f"`sudo .venv/bin/python benchmarks/sched_throughput.py {inventory} {mode(mem)} --write`: "
        f"{ARRAY_TASKS} array tasks and {SINGLE_JOBS} single jobs (`sbatch --wrap=true -n1 -t 1`), {request}. "
        + note, "",
        "| what | wall | rate | goal |",
        "|---|---|---|---|",
        f"| submit {result.jobs} jobs | {result.submit_s:.1f} s | {result.submit_rate:.0f} jobs/s | |",
        f"| all completed (from the first submission until `squeue` shows none) | {result.done_s:.1f} s | "
        f"{result.done_rate:.1f} jobs/s | <= {GOAL_S:.0f} s: {verdict} |", "",
        f"CPU time: client commands {result.client_cpu_s:.1f} s, slurmctld {ctld}. sacct: {states}.", "",
        f"Machine: {host}.", "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("inventory")
    memory = parser.add_mutually_exclusive_group()
    memory.add_argument("--mem", default="1M", help="--mem of every job (default 1M)")
    memory.add_argument("--no-mem", action="store_true", help="no --mem: the cluster's default memory decides")
    parser.add_argument("--partition", help="default: the cluster's default partition")
    parser.add_argument("--parallel", type=int, default=4, help="sbatch processes at once for the single jobs")
    parser.add_argument("--timeout", type=float, default=300.0, help="cancel the jobs after this many seconds")
    parser.add_argument("--note", default="", help="a sentence for the docs, e.g. what is deployed")
    parser.add_argument("--write", action="store_true", help="write the results into docs/benchmarks.md")
    options = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: it submits as the inventory's test user with runuser")
    cluster = load_cluster(options.inventory)
    inventory = cluster.inventory
    paths = inventory.slurm.paths
    client = Client(inventory.training.test_user, f"{paths.conf_dir}/slurm.conf")
    name = f"sched-bench-{os.getpid()}"
    mem = None if options.no_mem else options.mem
    result = measure(client, sbatch_options(name, mem, options.partition), name, options.parallel,
                     options.timeout, Path(paths.run_dir) / "slurmctld.pid")
    text = section(result, os.path.relpath(options.inventory, REPO), mem, options.note, machine())
    print(text)
    if options.write:
        BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text, parent=SECTION))


if __name__ == "__main__":
    main()
