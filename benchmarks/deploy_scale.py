"""Deploy cost per compute host: the test bed with N compute hosts, first install and no-ops.

    flock /tmp/cluster-heavy.lock .venv/bin/python benchmarks/deploy_scale.py run --computes N
    .venv/bin/python benchmarks/deploy_scale.py report [--write]

``run`` boots the test bed ``scale`` (ctl: slurmctld + slurmdbd + MariaDB; c1..cN: one slurmd
with a fake GPU each), deploys it three times (first install; a no-op, which takes the plan's
short path; a no-op with --full, the whole playbook) and takes the bed down. Each deploy is
cluster-cli run as a child: wall time, and the CPU of its whole process tree (os.wait4: user +
sys of cluster-cli, ansible-playbook, its workers and their ssh clients), the main ansible-playbook
process's own CPU (sampled from /proc) and, apart, the ssh ControlPersist masters' CPU (they
detach from the tree; this process adopts them as a child subreaper and reads theirs).
The results, with the per-task profile of each deploy's events, go to OUT/N.json.

``report`` fits cost = fixed + per_host x hosts over the runs in OUT, projects 1,000 and 10,000
compute hosts (benchmarks/scale_model.py) and, with --write, replaces the "Deploy at scale"
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import configparser
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]
import scale_report
from deploy_local import machine
from task_profile import aggregate, read_events

from cluster_cli.ansible.forks import forks_environment
from devtools.deploy_summary import parse_summary_line

REPO = Path(__file__).resolve().parents[1]
BED = "scale"
DEFAULT_OUT = Path("/var/tmp/cluster-deploy-scale")
STEPS: tuple[tuple[str, list[str]], ...] = (("first install", []), ("no-op (plan short path)", []), ("no-op --full", ["--full"]))
TOP_TASKS = 10


@dataclass
class StepResult:
    step: str
    wall_s: float
    cpu_user_s: float
    cpu_sys_s: float
    main_cpu_s: float  # the main ansible-playbook process alone (0: no playbook ran)
    ssh_master_cpu_s: float  # the ssh ControlPersist masters, which detach from the tree
    returncode: int
    changed: int | None
    load: str  # 1, 5, 15 min load average when the step started
    profile: dict[str, Any] = field(default_factory=dict)

    @property
    def cpu_s(self) -> float:
        return self.cpu_user_s + self.cpu_sys_s


PR_SET_CHILD_SUBREAPER = 36


def subreaper(on: bool) -> None:
    """Become (or stop being) the parent of orphaned descendants: the detached ssh masters."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def ssh_masters() -> dict[int, float]:
    """CPU so far of this process's ssh children (the adopted masters; exited ones are zombies still)."""
    found = {}
    for pid in _children(os.getpid()):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "ssh":
                continue
        except OSError:
            continue
        cpu = _self_cpu(pid)
        if cpu is not None:
            found[pid] = cpu
    return found


def reap_zombies() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def inventory_text(cluster: str, hosts: list[dict[str, Any]], monitoring: bool = False,
                   directory: Path | None = None) -> str:
    """The cluster inventory for the bed's hosts.json: ``ctl`` and compute hosts ``c1``..``cN``;
    with ``monitoring``, Prometheus on ctl and node_exporter on every host (roles/node_exporter on
    each compute host); with ``directory`` (a folder holding ca.pem and bind-password), an LDAP
    directory, so SSSD on every host (roles/sssd). Its server ``ldap`` does not exist on the bed:
    SSSD starts offline and no lookup leaves the host, which is all the control node's cost needs."""
    address = {host["name"]: host["address"] for host in hosts}
    computes = sorted((name for name in address if name != "ctl"), key=lambda name: int(name[1:]))
    first = hosts[0]
    return "\n".join([
        f"cluster_name: {cluster}",
        "ssh:",
        "  user: root",
        f"  private_key: {first['key']}",
        f"  common_args: {json.dumps(first['ssh_common_args'])}",
        "package_mirror:",
        "  apt: {uri: 'file:/mirror', suites: ['./'], trusted: true}",
        "  pip: {find_links: [/mirror/wheels], no_index: true}",
        "hosts:",
        f"  - {{name: ctl, address: {address['ctl']}}}",
        "controllers: {primary: ctl}",
        "accounting: {enabled: true, host: ctl}",
        "node_groups:",
        "  - name: cpu",
        f"    nodes: c[1-{len(computes)}]",
        f"    addresses: \"{','.join(address[name] for name in computes)}\"",
        "    sockets: 1",
        "    cores_per_socket: 2",
        "    threads_per_core: 1",
        "    real_memory_mb: 2048",
        "    gpus: {count: 1, type: fake, devices: /dev/fake-gpu/nvidia0, fake: true}",
        "partitions:",
        "  - {name: debug, nodes: [cpu], default: true, max_time: '01:00:00'}",
        "# no torch: its pip install is the hosts' work, not the control node's (numpy still is)",
        "training: {torch_version: null}",
        # MPI's packages and mpi4py add no task of their own (slurmd's package task, the pip install):
        # host work, not the control node's; and the bed's wheelhouse may carry no mpi4py
        "mpi: {enabled: false}",
        *(["monitoring: {host: ctl}"] if monitoring else []),
        *([f"people: {{directory: {{uri: ['ldap://ldap'], base_dn: 'dc=cluster,dc=test', ca_file: {directory}/ca.pem, "
           f"bind_dn: 'cn=sssd,dc=cluster,dc=test', bind_password_file: {directory}/bind-password, min_id: 20000}}}}"]
          if directory is not None else []),
        "",
    ])


def ansible_settings(hosts: int) -> dict[str, str]:
    """forks as cluster-cli sizes them for ``hosts`` hosts on this machine (cluster_cli.ansible.forks),
    strategy, gathering, pipelining and ssh_args as the repository's ansible.cfg sets them (the
    strategy as ANSIBLE_STRATEGY sets it, when it does: cluster-cli passes the environment on)."""
    config = configparser.ConfigParser()
    config.read(REPO / "ansible.cfg")
    return {
        "forks": forks_environment(hosts).get("ANSIBLE_FORKS") or os.environ["ANSIBLE_FORKS"],
        "strategy": os.environ.get("ANSIBLE_STRATEGY", "") or config.get("defaults", "strategy", fallback="linear"),
        "gathering": config.get("defaults", "gathering", fallback="implicit"),
        "pipelining": config.get("ssh_connection", "pipelining", fallback="False"),
        "ssh_args": config.get("ssh_connection", "ssh_args", fallback=""),
    }


def _self_cpu(pid: int) -> float | None:
    """utime + stime of one process (not its children), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children += map(int, (task / "children").read_text().split())
        except OSError:
            continue
    return children


def _playbook_children(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        try:
            if b"ansible-playbook" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            continue
    return found


class MainSampler(threading.Thread):
    """Follows the CPU of cluster-cli's ansible-playbook children (the main processes) until stopped."""

    def __init__(self, pid: int, period_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.pid, self.period_s = pid, period_s
        self.last: dict[int, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.period_s):
            for child in _playbook_children(self.pid):
                cpu = _self_cpu(child)
                if cpu is not None:
                    self.last[child] = cpu

    @property
    def cpu_s(self) -> float:
        return sum(self.last.values())


def measured_deploy(step: str, argv: list[str], env: dict[str, str], log: Path) -> StepResult:
    """Run cluster-cli to its end; wall, the tree's rusage (wait4) and the main process's CPU."""
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    reap_zombies()
    masters_before = ssh_masters()
    with open(log, "w") as out:
        started = time.monotonic()
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT)
        sampler = MainSampler(process.pid)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.monotonic() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        sampler.done.set()
        sampler.join()
    masters = sum(cpu - masters_before.get(pid, 0.0) for pid, cpu in ssh_masters().items())
    summary = parse_summary_line(log.read_text())
    return StepResult(step=step, wall_s=wall, cpu_user_s=usage.ru_utime, cpu_sys_s=usage.ru_stime,
                      main_cpu_s=sampler.cpu_s, ssh_master_cpu_s=masters, returncode=process.returncode,
                      changed=summary[1] if summary else None, load=load)


def testbed(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testbed", *args, "--name", BED], cwd=REPO,
                          capture_output=True, text=True, check=False)


def is_compute(host: str) -> bool:
    """c1..cN; not ctl, nor localhost (the control node's preflight play)."""
    return re.fullmatch(r"c[0-9]+", host) is not None


def profile_summary(events: Path) -> dict[str, Any]:
    """What the report needs from a deploy's events: per play and the top tasks, compute hosts."""
    if not events.exists():
        return {}
    profile = aggregate(read_events(events), is_compute)
    return {
        "compute_hosts": len(profile.compute_hosts),
        "compute_host_seconds": profile.compute_seconds,
        "other_host_seconds": profile.other_seconds,
        "compute_results": sum(cost.runs for cost in profile.tasks.values()),
        "compute_skipped": sum(cost.skipped for cost in profile.tasks.values()),
        "plays": profile.plays,
        "top": [asdict(cost) for cost in profile.top(TOP_TASKS * 2)],
    }


def directory_files(work: Path) -> Path:
    """A throwaway CA certificate and a private bind password, as a site keeps them."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", str(work / "ca.key"), "-out", str(work / "ca.pem"), "-subj", "/CN=deploy-scale",
                    "-days", "1"], check=True, capture_output=True)
    password = work / "bind-password"
    password.write_text("deploy-scale\n")
    password.chmod(0o600)
    return work


def run_bed(computes: int, out: Path, monitoring: bool = False, directory: bool = False) -> dict[str, Any]:
    """Bed up, the three deploys, bed down (always); the figures as a JSON-able dict."""
    work = Path(tempfile.mkdtemp(prefix=f"deploy-scale-{computes}-", dir=out))
    names = ["ctl"] + [f"c{index}" for index in range(1, computes + 1)]
    started = time.monotonic()
    up = testbed("up", "--hosts", ",".join(names), "--apt-sources", "none")
    up_s = time.monotonic() - started
    try:
        if up.returncode != 0:
            raise SystemExit(f"testbed up failed:\n{up.stdout[-3000:]}{up.stderr[-3000:]}")
        hosts = json.loads(Path(f"/var/lib/cluster-testbed/{BED}/hosts.json").read_text())
        inventory = work / "cluster.yaml"
        inventory.write_text(inventory_text(f"tb{BED}", hosts, monitoring, directory_files(work) if directory else None))
        subreaper(True)
        steps = run_steps(inventory, work)
    finally:
        subreaper(False)
        reap_zombies()
        down = testbed("down")
        print(f"testbed down: exit {down.returncode}", flush=True)
    return {"computes": computes, "hosts": len(names), "up_s": up_s, "machine": machine(), "monitoring": monitoring,
            "directory": directory,
            "settings": ansible_settings(computes + 1), "work": str(work), "steps": [asdict(step) for step in steps]}


def run_steps(inventory: Path, work: Path) -> list[StepResult]:
    env = {**os.environ, "XDG_STATE_HOME": str(work / "state"), "PYTHONUNBUFFERED": "1"}
    results = []
    for index, (step, extra) in enumerate(STEPS):
        events = work / f"events-{index}.jsonl"
        argv = [sys.executable, "-m", "cluster_cli", "deploy", *extra, str(inventory)]
        result = measured_deploy(step, argv, {**env, "CLUSTER_CLI_EVENTS_LOG": str(events)},
                                 work / f"deploy-{index}.log")
        result.profile = profile_summary(events)
        print(f"{step}: {result.wall_s:.1f} s wall, {result.cpu_s:.1f} CPU-s "
              f"(main {result.main_cpu_s:.1f}, ssh masters {result.ssh_master_cpu_s:.1f}), exit {result.returncode}, {result.changed} changed, "
              f"load {result.load}", flush=True)
        results.append(result)
        if result.returncode != 0:
            print((work / f"deploy-{index}.log").read_text()[-4000:], file=sys.stderr)
            break
    return results


def _terminated(signum: int, _frame: object) -> None:
    raise SystemExit(f"terminated by signal {signum}")


def with_profiles(run: dict[str, Any]) -> dict[str, Any]:
    """The run with its profiles read again from the event logs, where they are still there."""
    for index, step in enumerate(run["steps"]):
        events = Path(run["work"]) / f"events-{index}.jsonl"
        if events.exists():
            step["profile"] = profile_summary(events)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results dir (default {DEFAULT_OUT})")
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="one bed: up, three deploys, down (run it under the heavy lock)")
    run.add_argument("--computes", type=int, required=True)
    run.add_argument("--monitoring", action="store_true",
                     help="the inventory with monitoring.host: ctl (give it its own --out: report fits every run there)")
    run.add_argument("--directory", action="store_true",
                     help="the inventory with people.directory: SSSD on every host (its own --out too)")
    report = sub.add_parser("report", help="fit, project and print (or --write) the section")
    report.add_argument("--write", action="store_true")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    if options.cmd == "run":
        if os.geteuid() != 0:
            raise SystemExit("needs root: the test bed boots systemd-nspawn hosts")
        signal.signal(signal.SIGTERM, _terminated)  # a timeout still takes the bed down (finally)
        figures = run_bed(options.computes, options.out, options.monitoring, options.directory)
        (options.out / f"{options.computes}.json").write_text(json.dumps(figures, indent=2) + "\n")
        failed = [step for step in figures["steps"] if step["returncode"] != 0]
        raise SystemExit(1 if failed or len(figures["steps"]) < len(STEPS) else 0)
    runs = [with_profiles(json.loads(path.read_text())) for path in sorted(options.out.glob("*.json"))]
    text = scale_report.section(sorted(runs, key=lambda run: run["computes"]))
    print(text)
    if options.write:
        scale_report.write(text)


if __name__ == "__main__":
    main()
