"""Fixtures for the checks molecule's verify step runs against a deployed test bed cluster.

Run by molecule (``verify.yml``) with the scenario's test bed and inventory in the
environment; run by hand with the same variables against a bed that is up:

    CLUSTER_TB_NAME=mol CLUSTER_TB_INVENTORY=.../cluster.yaml CLUSTER_TB_BUILD_DIR=.../build \
        python -m pytest molecule/tests

Hosts are reached with testinfra's ssh backend through the bed's ssh_config (the bed's key,
pinned host keys, the ProxyCommand into its network namespace).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import testinfra

from cluster_cli.cluster import Cluster
from cluster_cli.loader import load_cluster
from devtools.deploy_summary import parse_summary_line
from testbed import Testbed

REPO = Path(__file__).resolve().parents[2]
# After the jobs on a node end, the node is idle again within this many seconds (issue 32).
# Reads a URL on a bed host itself (the bed's hosts have Python, not curl).
FETCH = "python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())'"
IDLE_AFTER_JOBS_S = 30


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set: these checks run from molecule's verify step (molecule/README)")
    return value


def long_checks_only() -> None:
    """Skip the caller unless CLUSTER_TB_LONG=1 (molecule/shared/vars/common.yml): the checks that
    deploy the whole bed again more than once, left out of CI's time budget."""
    if os.environ.get("CLUSTER_TB_LONG", "") not in ("1", "true", "yes"):
        pytest.skip("deploys the bed again (1-3 min): set CLUSTER_TB_LONG=1")


@pytest.fixture(scope="session")
def bed() -> Testbed:
    testbed = Testbed.for_name(_env("CLUSTER_TB_NAME"))
    if not testbed.hosts:
        pytest.fail(f"no test bed in {testbed.run_dir}: run `molecule create` first")
    return testbed


@pytest.fixture(scope="session")
def inventory_path() -> Path:
    return Path(_env("CLUSTER_TB_INVENTORY"))


@pytest.fixture(scope="session")
def build_dir() -> Path:
    return Path(_env("CLUSTER_TB_BUILD_DIR"))


@pytest.fixture(scope="session")
def cluster(inventory_path: Path) -> Cluster:
    return load_cluster(inventory_path)


def bed_host(bed: Testbed, name: str) -> testinfra.host.Host:
    return testinfra.get_host(f"ssh://{name}", ssh_config=str(bed.run_dir / "ssh_config"), timeout=30)


@pytest.fixture(scope="session")
def hosts(bed: Testbed, cluster: Cluster) -> dict[str, testinfra.host.Host]:
    return {name: bed_host(bed, name) for name in cluster.hosts}


def hosts_with(cluster: Cluster, role: str) -> list[str]:
    return [name for name, host in cluster.hosts.items() if role in host.roles]


@dataclass
class ClusterView:
    """The deployed cluster: hosts by role and helpers to drive Slurm on them."""

    cluster: Cluster
    hosts: dict[str, testinfra.host.Host]
    bed: Testbed
    inventory_path: Path
    build_dir: Path

    @property
    def controller(self) -> str:
        return self.cluster.inventory.controllers.primary

    @property
    def submit(self) -> str:
        logins = self.cluster.inventory.login
        return logins[0] if logins else self.controller

    @property
    def compute(self) -> list[str]:
        return hosts_with(self.cluster, "compute")

    @property
    def database(self) -> str | None:
        found = hosts_with(self.cluster, "database")
        return found[0] if found else None

    @property
    def nodes(self) -> list[str]:
        return [node.name for node in self.cluster.nodes]

    def prometheus(self, path: str) -> dict[str, Any]:
        """The `data` of Prometheus' HTTP API answer to ``path`` (``/api/v1/alerts``, ``/api/v1/query?query=...``),
        asked on the monitoring host itself (it listens on that host's address only)."""
        monitoring = self.cluster.inventory.monitoring
        assert monitoring.host is not None, "this scenario's inventory has no monitoring host"
        url = f"http://{self.cluster.hosts[monitoring.host].address}:{monitoring.ports.prometheus}{path}"
        answer = json.loads(self.run(monitoring.host, f"{FETCH} {shlex.quote(url)}").stdout)
        assert answer["status"] == "success", answer
        return answer["data"]

    def firing(self, alert: str) -> list[dict[str, str]]:
        """The labels of each firing instance of ``alert`` in Prometheus."""
        return [item["labels"] for item in self.prometheus("/api/v1/alerts")["alerts"]
                if item["labels"]["alertname"] == alert and item["state"] == "firing"]

    def keeps_config_files(self, host: str) -> bool:
        """Whether the deploy puts slurm.conf and the other configs on ``host``: every host, or in
        configless mode the controllers, login and database hosts only."""
        roles = self.cluster.hosts[host].roles
        return not self.cluster.inventory.slurm.configless or bool(roles & {"controller", "login", "database"})

    def conf_cache(self, node: str) -> str:
        """Where the slurmd of ``node`` keeps the files it fetched in configless mode."""
        return f"{self.cluster.inventory.slurm.paths.spool_dir}/{node}/conf-cache"

    def host(self, name: str) -> testinfra.host.Host:
        """The testinfra host ``name``: a cluster host, or another host of the bed (one a test adds
        to the cluster)."""
        if name not in self.hosts:
            self.bed.host(name)  # fails, naming the bed's hosts, for a host it does not have
            self.hosts[name] = bed_host(self.bed, name)
        return self.hosts[name]

    def run(self, host: str, command: str, check: bool = True) -> testinfra.backend.base.CommandResult:
        result = self.host(host).run(command)
        if check and result.rc != 0:
            pytest.fail(f"{host}: `{command}` exited {result.rc}: {result.stdout}{result.stderr}")
        return result

    def add_login_user(self, host: str, name: str, uid: int, public_key: str) -> None:
        """A user on ``host`` with the same uid everywhere (as a site's directory gives it) who logs
        in with ``public_key`` only."""
        self.run(host, f"getent passwd {name} >/dev/null || useradd --create-home --uid {uid} --user-group "
                       f"--shell /bin/bash {name}")
        self.run(host, f"install -d -m 0700 -o {name} -g {name} ~{name}/.ssh && "
                       f"echo {shlex.quote(public_key)} > ~{name}/.ssh/authorized_keys && "
                       f"chown {name}:{name} ~{name}/.ssh/authorized_keys && chmod 0600 ~{name}/.ssh/authorized_keys")

    def slurm(self, command: str, host: str | None = None) -> str:
        return self.run(host or self.submit, command).stdout.strip()

    def node_states(self) -> dict[str, tuple[str, str]]:
        """node -> (state, reason), from the controller: one listing of every node (sinfo -N %N|%T|%E).

        Never `sinfo -n NODE` for one node: slurmctld answers a one-node query from its cached
        allocated-CPU counts, which only a listing of every node (or a health check cycle)
        refreshes, so within HealthCheckInterval of a slurmctld start it can call an idle node
        "mixed" for minutes (docs/operations.md, "Nodes allocated with no job"; issue 32)."""
        states: dict[str, tuple[str, str]] = {}
        for line in self.slurm("sinfo -h -N -o '%N|%T|%E'", self.controller).splitlines():
            name, _, rest = line.partition("|")
            state, _, reason = rest.partition("|")
            states.setdefault(name, (state, reason))  # one line per partition: any will do
        return states

    def node_state(self, node: str) -> tuple[str, str]:
        """(state, reason) of a node (node_states)."""
        states = self.node_states()
        if node not in states:
            pytest.fail(f"slurmctld lists no node {node}: {sorted(states)}")
        return states[node]

    def seconds_since(self, timestamp: str) -> float:
        """Seconds from a Slurm timestamp (the controller's local time, as scontrol prints it) to
        now, by the controller's clock."""
        out = self.run(self.controller, f"echo $(( $(date +%s) - $(date -d {shlex.quote(timestamp)} +%s) ))").stdout
        return float(out.strip())

    def assert_nodes_idle_after(self, jobs: list[str], within: float = IDLE_AFTER_JOBS_S) -> float:
        """Every node idle with no reason within ``within`` s of the end of the last of ``jobs``
        (their EndTime), by itself: no restart, no other help. Returns the seconds from that end
        until every node was seen idle; fails with slurmctld's figures otherwise."""
        last = max(self.job(job)["EndTime"] for job in jobs)  # ISO timestamps sort as times
        while True:
            seen = self.node_states()
            elapsed = self.seconds_since(last)
            if all(seen.get(node) == ("idle", "none") for node in self.nodes):
                return elapsed
            if elapsed > within:
                figures = self.run(self.controller, "scontrol -o show node | grep -oE "
                                   "'^NodeName=[^ ]+|CPUAlloc=[^ ]+|AllocMem=[^ ]+|AllocTRES=[^ ]*' | paste -sd' '; "
                                   "squeue -a -t all -o '%i %T %e %N'", check=False).stdout
                pytest.fail(f"nodes not idle {elapsed:.0f} s after the last of jobs {jobs} ended at {last} "
                            f"(allowed: {within:.0f} s): {seen}\n{figures}")
            time.sleep(2)

    def job(self, job_id: str) -> dict[str, str]:
        out = self.slurm(f"scontrol -o show job {job_id}")
        return dict(re.findall(r"(\S+?)=(\S*)", out))

    def config(self) -> dict[str, str]:
        out = self.slurm("scontrol show config", self.controller)
        return {key.strip(): value.strip() for key, _, value in
                (line.partition("=") for line in out.splitlines() if "=" in line)}

    def wait_until(self, what: str, predicate: Callable[[], bool], timeout: float, every: float = 2.0) -> float:
        """Poll until ``predicate()``; returns the seconds it took, fails the test on timeout.

        A timeout needs both the time and the polls it stands for: the clock of a paused and
        resumed virtual machine can jump, which must not end a wait after a single poll."""
        start = time.monotonic()
        polls = 0
        while True:
            if predicate():
                return time.monotonic() - start
            polls += 1
            if time.monotonic() - start > timeout and polls * every >= timeout:
                pytest.fail(f"timed out after {timeout:.0f} s waiting until {what}")
            time.sleep(every)

    def cli(self, *args: str, check: bool = True, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        """cluster-cli on the control node, as a user would run it."""
        argv = [sys.executable, "-m", "cluster_cli", *args]
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            pytest.fail(f"`{shlex.join(args)}` exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        return done

    def deploy(self, *extra: str) -> subprocess.CompletedProcess[str]:
        """A full converge (every task, as before plan existed); the plan path is tested in tests/deploy."""
        full = [] if "--full" in extra else ["--full"]
        return self.cli("deploy", *full, "--build-dir", str(self.build_dir), *extra, str(self.inventory_path))

    def wait_nodes_idle(self, timeout: float = 120) -> None:
        seen: dict[str, tuple[str, str]] = {}

        def all_idle() -> bool:
            seen.update({node: self.node_state(node) for node in self.nodes})
            return all(state == ("idle", "none") for state in seen.values())
        try:
            self.wait_until("every node is idle with no reason", all_idle, timeout)
        except pytest.fail.Exception as failed:
            queue = self.run(self.controller, "squeue -a -o '%i %T %r %N'", check=False).stdout
            raise pytest.fail.Exception(f"{failed.msg}; last seen (state, reason): {seen}; squeue:\n{queue}") from None


@pytest.fixture(scope="session")
def view(cluster: Cluster, hosts: dict[str, testinfra.host.Host], bed: Testbed,
         inventory_path: Path, build_dir: Path) -> Iterator[ClusterView]:
    yield ClusterView(cluster, hosts, bed, inventory_path, build_dir)


def changed_count(deploy_output: str) -> int:
    """cluster-cli deploy ends with "Deploy: <seconds> s, <n> changed"."""
    summary = parse_summary_line(deploy_output)
    if summary is None:
        pytest.fail(f"no deploy summary in the output:\n{deploy_output[-2000:]}")
    return summary[1]
