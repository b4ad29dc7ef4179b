"""Mutation check for molecule/tests: take away each protection a fault or security test stands
for, deploy, and show that the test then fails; put the protection back and show it passes.

    sudo .venv/bin/python molecule/mutation_check.py [-s default] [--only NAME ...] [--keep] [--write]

Brings the scenario's hosts up and deploys them (molecule create + converge), runs the tests
once as they are (the control), then for each mutation:
  1. copies the working tree, changes one thing in the copy (a role's task or template) or in
     the inventory (a slurm.conf setting),
  2. deploys the cluster from the copy, and runs the tests that mutation should break, from the
     copy too (their own re-deploys then deploy the mutant),
  3. puts the cluster back: moves the mutant's deploy logs out of the cluster's (they may hold
     what it leaked), boots any host left off, runs the mutation's cleanup (what a deploy does
     not undo), cancels jobs, starts slurmd units, deploys from this tree, resumes down nodes
     and waits until every node is idle.
Last the tests run once more as they are, on the restored cluster. ``--write`` puts the result in
docs/testbed.md under "Mutation check". Exit 1 when a mutant survives or a control fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from cluster_cli.cluster import Cluster
from cluster_cli.loader import load_cluster
from devtools.markdown import replace_section
from cluster_cli.paths import cluster_state_dir
from testbed import Testbed

DOC = REPO / "docs" / "testbed.md"
SECTION = "## Mutation check"

T_KILLED_SLURMD = "test_40_faults.py::test_killed_slurmd_takes_its_node_out_and_a_requeue_job_finishes_elsewhere"
T_CTLD_RESTART = "test_40_faults.py::test_slurmctld_restart_keeps_running_and_pending_jobs"
T_REBOOT = "test_40_faults.py::test_rebooted_compute_host_returns_to_service"
T_KILLED_RANK = "test_40_faults.py::test_killed_rank_ends_the_step_within_killwait"
# One bed deploy for both since 2026-11-29 (the loosened files repaired and no secret in its --diff or logs).
T_REPAIR = "test_20_security.py::test_next_deploy_repairs_loosened_secret_files_and_its_diff_and_logs_hold_no_secret"
T_MUNGE_KEY = "test_20_security.py::test_munge_key_is_the_same_private_file_everywhere"
T_DBD_CONF = "test_20_security.py::test_slurmdbd_conf_is_private_to_slurm_and_only_on_the_database_host"
T_DIRS = "test_20_security.py::test_state_spool_and_log_directories_have_safe_owners_and_modes"
T_NO_SECRET = T_REPAIR
T_OTHER_SECRETS = "test_20_security.py::test_a_deploy_with_other_secrets_is_refused_naming_every_host"
T_NO_JOB_SSH = "test_25_isolation.py::test_a_user_without_a_job_on_the_node_is_refused_ssh"
# The smoke suite's checks as catchers (Session.run_tests runs them with `cluster-cli smoke --only`).
SMOKE = "smoke::"
S_FAIRSHARE = f"{SMOKE}fairshare"
S_PREEMPT = f"{SMOKE}preempt"
S_QOS_LIMIT = f"{SMOKE}qos-limit"
T_OWN_JOBS = "test_25_isolation.py::test_a_user_sees_only_their_own_jobs"
T_NO_ASSOCIATION = "test_25_isolation.py::test_a_job_from_a_user_without_an_association_is_rejected"
T_DB_LOCAL = "test_25_isolation.py::test_the_accounting_database_listens_on_its_own_host_only"


@dataclass(frozen=True)
class Mutation:
    """One protection taken away: a slurm.conf setting in the inventory, or a text change in a file."""

    name: str
    removes: str
    tests: tuple[str, ...]
    slurm_conf: dict[str, int | str | None] = field(default_factory=dict)  # None deletes a default key
    inventory: dict[str, Any] = field(default_factory=dict)  # merged into the inventory's mappings
    patch: tuple[str, str, str] | None = None  # (path in the tree, text, replacement)
    cleanup: str | None = None  # run on every host before the restoring deploy: what that deploy does not undo

    def apply(self, tree: Path, inventory: Path, mutated_inventory: Path) -> None:
        data = yaml.safe_load(inventory.read_text())
        data.setdefault("slurm", {}).setdefault("conf", {}).update(self.slurm_conf)
        merge(data, self.inventory)
        mutated_inventory.write_text(yaml.safe_dump(data, sort_keys=False))
        if self.patch is not None:
            path, text, replacement = self.patch
            target = tree / path
            current = target.read_text()
            if current.count(text) != 1:
                raise RuntimeError(f"mutation {self.name}: {path} holds {current.count(text)} copies of {text!r}, "
                                   "not 1: update the mutation to the current file")
            target.write_text(current.replace(text, replacement))


def merge(data: dict[str, Any], changes: dict[str, Any]) -> None:
    """``changes`` into ``data``: mappings merged key by key, anything else replaced."""
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            merge(data[key], value)
        else:
            data[key] = value


MUTATIONS = [
    Mutation("slurmd-timeout-0", "SlurmdTimeout=0: a silent slurmd never takes its node out of service",
             (T_KILLED_SLURMD,), slurm_conf={"SlurmdTimeout": 0}),
    Mutation("slurmctld-clears-state", "slurmctld started with -c: saved jobs and node states dropped on restart",
             (T_CTLD_RESTART,),
             patch=("roles/slurmctld/templates/slurmctld-override.conf.j2",
                    "Environment=SLURM_CONF={{ __slurmctld_conf_dir }}/slurm.conf\n",
                    "Environment=SLURM_CONF={{ __slurmctld_conf_dir }}/slurm.conf\nEnvironment=SLURMCTLD_OPTIONS=-c\n")),
    Mutation("return-to-service-0", "ReturnToService=0: a node that was down stays down after it boots",
             (T_REBOOT,), slurm_conf={"ReturnToService": 0}),
    Mutation("kill-on-bad-exit-0", "KillOnBadExit=0: the other ranks run on after one is killed",
             (T_KILLED_RANK,), slurm_conf={"KillOnBadExit": 0}),
    Mutation("munge-key-0600", "munge role installs the key 0600 instead of 0400",
             (T_MUNGE_KEY, T_REPAIR), patch=("roles/munge/tasks/configure.yml", 'mode: "0400"', 'mode: "0600"')),
    Mutation("munge-dir-0755", "munge role leaves /etc/munge 0755 instead of 0700",
             (T_MUNGE_KEY,), patch=("roles/munge/tasks/configure.yml", 'mode: "0700"', 'mode: "0755"')),
    Mutation("slurmdbd-conf-0640", "slurmdbd role installs slurmdbd.conf 0640 instead of 0600",
             (T_DBD_CONF, T_REPAIR), patch=("roles/slurmdbd/tasks/configure.yml", 'mode: "0600"', 'mode: "0640"')),
    Mutation("slurmdbd-conf-everywhere", "slurm_common copies slurmdbd.conf to every host with the other configs",
             (T_DBD_CONF,),
             patch=("roles/slurm_common/vars/main.yml", "__slurm_common_optional_files:\n  - topology.conf\n",
                    "__slurm_common_optional_files:\n  - topology.conf\n  - slurmdbd.conf\n"),
             cleanup="rm -f {conf_dir}/slurmdbd.conf"),
    Mutation("slurmdbd-conf-diff-shown", "slurmdbd.conf copied without diff: false and no_log",
             (T_NO_SECRET,),
             patch=("roles/slurmdbd/tasks/configure.yml", '    mode: "0600"\n  diff: false\n  no_log: true\n',
                    '    mode: "0600"\n')),
    Mutation("state-dir-0755", "slurmctld role leaves StateSaveLocation 0755 instead of 0700",
             (T_DIRS,), patch=("roles/slurmctld/tasks/configure.yml", 'mode: "0700"', 'mode: "0755"')),
    Mutation("no-secrets-preflight", "the munge role's preflight lets a host keep or take another munge key",
             (T_OTHER_SECRETS,),
             patch=("roles/munge/tasks/key_check.yml", "that: __munge_key_mismatched | length == 0", "that: true"),
             # the mutant's deploy put the other secrets' key on every host, marked as the cluster's
             cleanup="rm -f /var/lib/slurm/munge-key-installed-by-cluster-cli "
                     "/var/lib/slurm/slurmdbd-conf-installed-by-cluster-cli"),
    Mutation("no-pam-slurm-adopt", "slurmd role leaves pam_slurm_adopt out of /etc/pam.d/sshd",
             (T_NO_JOB_SSH,),
             patch=("roles/slurmd/vars/main.yml",
                    "__slurmd_pam_block, '', __slurmd_pam_adopt, __slurmd_pam_sshd_file",
                    "__slurmd_pam_block, '', false, __slurmd_pam_sshd_file")),
    Mutation("no-private-data", "PrivateData deleted: every user sees every job and its accounting",
             (T_OWN_JOBS,), slurm_conf={"PrivateData": None}),
    Mutation("no-enforce", "AccountingStorageEnforce deleted: a user without an association may submit",
             (T_NO_ASSOCIATION,), slurm_conf={"AccountingStorageEnforce": None}),
    # Teams (the bed with CLUSTER_TB_TEAMS=1): the smoke suite's own checks, run with the
    # scenario's inventory (what the site asked for) against the mutant.
    Mutation("no-fair-share", "PriorityType=priority/basic: jobs start first come, first served, whatever each account used",
             (S_FAIRSHARE,), inventory={"priority": {"type": "basic"}}),
    Mutation("no-preemption", "PreemptType=preempt/none: a high-QoS job waits for a low-QoS job's GPUs",
             (S_PREEMPT,), inventory={"priority": {"preemption": {"enabled": False}}}),
    Mutation("qos-limit-dropped", "the accounts module applies a QoS without its MaxTRESPerUser",
             (S_QOS_LIMIT,),
             patch=("cluster_cli/slurm_accounting.py", '"MaxTRESPU": dict(limits.max_tres_per_user),', '"MaxTRESPU": {},')),
    Mutation("mariadb-any-address", "MariaDB listens on every address of the database host",
             (T_DB_LOCAL,),
             patch=("roles/slurmdbd/templates/90-slurmdbd.cnf.j2", "bind-address = 127.0.0.1", "bind-address = 0.0.0.0")),
]


@dataclass
class Result:
    mutation: Mutation
    deployed: bool
    outcomes: dict[str, str]
    seconds: float

    @property
    def caught(self) -> bool:
        """Every test the mutation should break failed (a refused deploy catches it too)."""
        return not self.deployed or all(self.outcomes.get(test) == "failed" for test in self.mutation.tests)


class Session:
    """The scenario's deployed bed and the commands run against it."""

    def __init__(self, scenario: str, work: Path) -> None:
        self.scenario = scenario
        self.work = work
        settings = yaml.safe_load((REPO / "molecule" / scenario / "vars" / "testbed.yml").read_text())
        self.bed_name: str = settings["tb_name"]
        self.ephemeral = work / "molecule"
        self.inventory = self.ephemeral / "cluster.yaml"
        self.build_dir = self.ephemeral / "build"
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                    "MOLECULE_EPHEMERAL_DIRECTORY": str(self.ephemeral),
                    "CLUSTER_TB_REPORT_DIR": str(work / "reports"), "PY_COLORS": "0", "ANSIBLE_FORCE_COLOR": "0",
                    # the bed with teams: the catchers of the accounting mutations need them
                    "CLUSTER_TB_TEAMS": "1",
                    # and every check, the long ones CI leaves out too
                    "CLUSTER_TB_LONG": "1"}
        self.log = work / "mutation.log"

    def _run(self, argv: list[str], cwd: Path, env: dict[str, str] | None = None,
             timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(argv, cwd=cwd, env=env or self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        with open(self.log, "a") as out:
            out.write(f"===== {' '.join(argv)} (in {cwd}): exit {done.returncode}\n{done.stdout}\n{done.stderr}\n")
        return done

    def molecule(self, step: str) -> None:
        done = self._run([str(Path(sys.executable).parent / "molecule"), step, "-s", self.scenario], REPO)
        if done.returncode != 0:
            raise RuntimeError(f"molecule {step} -s {self.scenario} failed; log: {self.log}")

    def deploy(self, tree: Path, inventory: Path, build_dir: Path) -> bool:
        """Every task on every host (--full): a mutated role is no change the plan can see, so the
        plan's short path would deploy nothing."""
        argv = [sys.executable, "-m", "cluster_cli", "deploy", "--full", "--build-dir", str(build_dir),
                str(inventory)]
        return self._run(argv, tree).returncode == 0

    def run_tests(self, tree: Path, inventory: Path, build_dir: Path, tests: list[str], label: str) -> dict[str, str]:
        """{test: passed|failed|skipped} from pytest's JUnit report, run in ``tree``; the smoke
        checks among them from the smoke suite's report."""
        checks = [test[len(SMOKE):] for test in tests if test.startswith(SMOKE)]
        pytests = [test for test in tests if not test.startswith(SMOKE)]
        outcomes = self.run_smoke(checks, label) if checks else {}
        return outcomes | (self.run_pytest(tree, inventory, build_dir, pytests, label) if pytests else {})

    def run_smoke(self, checks: list[str], label: str) -> dict[str, str]:
        """The smoke suite's ``checks`` with this tree and the scenario's own inventory: its targets
        are what the site asked for, whatever the mutant deployed."""
        report = self.work / f"{label}-smoke.json"
        self._run([sys.executable, "-m", "cluster_cli", "smoke", str(self.inventory), "--only", ",".join(checks),
                   "--json", str(report)], REPO)
        verdicts = {check["name"]: check["verdict"] for check in
                    (json.loads(report.read_text())["checks"] if report.exists() else [])}
        named = {"pass": "passed", "fail": "failed", "skip": "skipped"}
        return {f"{SMOKE}{check}": named.get(verdicts.get(check, ""), "missing") for check in checks}

    def run_pytest(self, tree: Path, inventory: Path, build_dir: Path, tests: list[str], label: str) -> dict[str, str]:
        report = self.work / f"{label}.xml"
        env = {**self.env, "CLUSTER_TB_NAME": self.bed_name, "CLUSTER_TB_INVENTORY": str(inventory),
               "CLUSTER_TB_BUILD_DIR": str(build_dir)}
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-s", f"--junitxml={report}",
                *(f"molecule/tests/{test}" for test in tests)]
        self._run(argv, tree, env)
        by_name = {}
        for case in ET.parse(report).getroot().iter("testcase") if report.exists() else []:
            kinds = {child.tag for child in case}
            by_name[case.get("name")] = ("failed" if kinds & {"failure", "error"} else
                                         "skipped" if "skipped" in kinds else "passed")
        return {test: by_name.get(test.split("::")[1], "missing") for test in tests}

    def restore(self, cluster: Cluster, mutation: Mutation, since: float) -> None:
        """The cluster as the control found it: every host up, no job, this tree deployed, nodes idle,
        and the mutant's deploy logs (which may hold what a mutant leaked) moved out of the cluster's."""
        logs = cluster_state_dir(cluster.name) / "logs"
        kept = self.work / f"{mutation.name}-logs"
        kept.mkdir(mode=0o700, exist_ok=True)
        for log in logs.glob("*.log"):
            if log.stat().st_mtime >= since:
                shutil.move(log, kept / log.name)
        bed = Testbed.for_name(self.bed_name)
        controller = cluster.inventory.controllers.primary
        for host in cluster.hosts:
            bed.start(host)
            if mutation.cleanup:
                command = mutation.cleanup.format(conf_dir=cluster.inventory.slurm.paths.conf_dir)
                bed.exec(host, ["sh", "-c", command])
        bed.exec(controller, ["sh", "-c", "squeue -h -o %i | xargs -r scancel"], check=False)
        for name, managed in cluster.hosts.items():
            for node in managed.slurmd_nodes:
                bed.exec(name, ["systemctl", "start", f"slurmd@{node.name}"], check=False)
        if not self.deploy(REPO, self.inventory, self.build_dir):
            raise RuntimeError(f"the deploy that restores the cluster failed; log: {self.log}")
        nodes = ",".join(node.name for node in cluster.nodes)
        bed.exec(controller, ["scontrol", "update", f"nodename={nodes}", "state=resume"], check=False)
        for _ in range(60):  # polls, not a deadline: the clock of a paused VM can jump
            states = bed.exec(controller, ["sinfo", "-h", "-N", "-o", "%t"], check=False).stdout.split()
            if states and all(state == "idle" for state in states):
                return
            time.sleep(5)
        raise RuntimeError(f"nodes not idle after the restore: {states}")


def check(session: Session, mutations: list[Mutation]) -> tuple[dict[str, str], list[Result], dict[str, str]]:
    cluster = load_cluster(session.inventory)
    tests = list(dict.fromkeys(test for mutation in mutations for test in mutation.tests))
    before = session.run_tests(REPO, session.inventory, session.build_dir, tests, "control-before")
    print("control:", ", ".join(f"{shown(test)} {outcome}" for test, outcome in before.items()), flush=True)
    results = []
    for mutation in mutations:
        start, since = time.monotonic(), time.time()
        tree = session.work / mutation.name
        copy_tree(REPO, tree)
        inventory = session.work / f"{mutation.name}.yaml"
        mutation.apply(tree, session.inventory, inventory)
        deployed = session.deploy(tree, inventory, session.work / f"{mutation.name}-build")
        outcomes = (session.run_tests(tree, inventory, session.work / f"{mutation.name}-build", list(mutation.tests),
                                      mutation.name) if deployed else {})
        session.restore(cluster, mutation, since)
        result = Result(mutation, deployed, outcomes, time.monotonic() - start)
        results.append(result)
        print(f"{mutation.name}: {'caught' if result.caught else 'SURVIVED'} "
              f"({'deploy refused' if not deployed else outcomes}) {result.seconds:.0f} s", flush=True)
    after = session.run_tests(REPO, session.inventory, session.build_dir, tests, "control-after")
    return before, results, after


def shown(test: str) -> str:
    """A test as the report names it: the pytest function, or the smoke check."""
    return f"smoke {test[len(SMOKE):]}" if test.startswith(SMOKE) else test.split("::")[1]


def copy_tree(source: Path, target: Path) -> None:
    """The working tree as git sees it (tracked and new files, not ignored ones)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=source,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        path = source / name
        if path.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target / name)


ROW = re.compile(r"^\| (?P<removes>[^|]+?) \| `(?P<test>[^`]+)` \| (?P<control>[^|]+?) \| (?P<without>[^|]+?) \|"
                 r" (?P<run>[^|]+?) \|$")


def report(scenario: str, before: dict[str, str], results: list[Result], after: dict[str, str],
           previous: str) -> str:
    """The "Mutation check" section: this run's rows, and the rows of earlier runs (from ``previous``,
    the section as it stands) for the mutations this run left out."""
    run = f"{date.today().isoformat()}, `{scenario}`"
    rows: dict[str, list[str]] = {}
    for line in previous.splitlines():
        found = ROW.match(line)
        if found:
            rows.setdefault(found["removes"], []).append(line)
    for result in results:
        rows[result.mutation.removes] = [
            f"| {result.mutation.removes} | `{shown(test)}` | {before.get(test)} | "
            f"{'deploy refused' if not result.deployed else result.outcomes.get(test, 'missing')} | {run} |"
            for test in result.mutation.tests]
    table = [line for mutation in MUTATIONS for line in rows.get(mutation.removes, [])]
    verdicts = {mutation.name: all((found := ROW.match(line)) is not None
                                   and found["without"] in ("failed", "deploy refused")
                                   for line in rows[mutation.removes])
                for mutation in MUTATIONS if mutation.removes in rows}
    survived = [name for name, caught in verdicts.items() if not caught]
    failed_controls = [test for test, outcome in {**before, **after}.items() if outcome != "passed"]
    return "\n".join([
        SECTION,
        "",
        "`sudo .venv/bin/python molecule/mutation_check.py -s default --write` (`--only NAME...` re-runs some):",
        "each protection taken away, the cluster deployed without it, and the tests that stand for it run",
        "against that cluster. \"deploy refused\": the daemon itself would not start without the protection.",
        "",
        "| protection taken away | test | as deployed | without the protection | run |",
        "|---|---|---|---|---|",
        *table,
        "",
        f"Mutants caught: {len(verdicts) - len(survived)} of {len(verdicts)}"
        + (f"; survived: {', '.join(survived)}" if survived else "")
        + f". The last run's control after its restores: {'all passed' if not failed_controls else failed_controls}.",
        "",
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-s", "--scenario", default="default")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=[mutation.name for mutation in MUTATIONS],
                        help="run only these mutations")
    parser.add_argument("--keep", action="store_true", help="leave the hosts up at the end")
    parser.add_argument("--write", action="store_true", help="write the result into docs/testbed.md")
    options = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("needs root: the test bed boots systemd-nspawn hosts")
    mutations = [mutation for mutation in MUTATIONS if not options.only or mutation.name in options.only]
    session = Session(options.scenario, Path(tempfile.mkdtemp(prefix=f"mutation-{options.scenario}-")))
    print(f"log: {session.log}", flush=True)
    start = time.monotonic()
    try:
        session.molecule("destroy")
        session.molecule("create")
        session.molecule("converge")
        before, results, after = check(session, mutations)
    finally:
        if not options.keep:
            session.molecule("destroy")
    current = DOC.read_text()
    section = current[current.index(SECTION):] if SECTION in current else ""
    text = report(options.scenario, before, results, after, section.split("\n## ")[0])
    print(text)
    print(f"{(time.monotonic() - start) / 60:.0f} min in all")
    if options.write:
        DOC.write_text(replace_section(current, text))
    clean = all(result.caught for result in results) and all(
        outcome == "passed" for outcome in {**before, **after}.values())
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())
