"""`cluster-cli upgrade` on the real bed (scenario upgrade): Slurm 24.11 -> 26.05 with a job
running through it and one pending behind it; every host at the new version afterwards, both jobs
completed normally, the accounting records from before still there, the database dump 0600.

Runs only where the scenario sets CLUSTER_TB_UPGRADE_TO (the target package version) and
CLUSTER_TB_UPGRADE_SUITE (the mirror suite that serves it). Writes upgrade.json (wall time, jobs
lost) into CLUSTER_TB_REPORT_DIR.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from conftest import IDLE_AFTER_JOBS_S, ClusterView

SLURM_PACKAGES = ("slurm-client", "slurmctld", "slurmd", "slurmdbd")
SHARED = "/srv/cluster-training"
GO = f"{SHARED}/upgrade-go"
# Runs until the test creates GO after the upgrade (then exits 0), at most 30 minutes.
WAITING_JOB = f"for i in $(seq 1800); do [ -e {GO} ] && exit 0; sleep 1; done; exit 1"


def _target() -> tuple[str, str]:
    target, suite = os.environ.get("CLUSTER_TB_UPGRADE_TO"), os.environ.get("CLUSTER_TB_UPGRADE_SUITE")
    if not target or not suite:
        pytest.skip("CLUSTER_TB_UPGRADE_TO / CLUSTER_TB_UPGRADE_SUITE not set: scenario upgrade only")
    return target, suite


def _versions(view: ClusterView, host: str) -> dict[str, str]:
    out = view.run(host, "dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\\n' "
                   + " ".join(SLURM_PACKAGES), check=False).stdout
    return {words[0]: words[1] for words in (line.split() for line in out.splitlines())
            if len(words) >= 3 and words[2] == "ii"}


def _edit_inventory(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def _accounted_jobs(view: ClusterView) -> set[str]:
    out = view.slurm("sacct -n -X -a -P -S 2020-01-01 -o JobID")
    return set(out.split())


def _replaced_binaries(view: ClusterView, host: str) -> list[str]:
    """Slurm daemons on the host still running a binary dpkg has replaced."""
    out = view.run(host, "for p in $(pgrep -x 'slurmctld|slurmdbd|slurmd|slurmstepd'); do "
                         "echo $p $(readlink /proc/$p/exe); done", check=False).stdout
    return [line for line in out.splitlines() if line.endswith("(deleted)") and "slurmstepd" not in line]


def _submit_jobs(view: ClusterView) -> tuple[str, str]:
    view.run(view.submit, f"rm -f {GO}")
    every = len(view.nodes)
    running = view.slurm(f"sbatch --parsable -N{every} -o {SHARED}/upgrade-running.out --wrap '{WAITING_JOB}'")
    view.wait_until(f"job {running} runs", lambda: view.job(running)["JobState"] == "RUNNING", timeout=120)
    pending = view.slurm(f"sbatch --parsable -N1 --dependency=afterok:{running} -o {SHARED}/upgrade-pending.out "
                         "--wrap 'scontrol --version'")
    assert view.job(pending)["JobState"] == "PENDING"
    return running, pending


def _upgrade(view: ClusterView, target: str) -> tuple[float, str]:
    start = time.monotonic()
    done = view.cli("upgrade", "--build-dir", str(view.build_dir), "--yes", view.cluster.name,
                    "--batch", "1", str(view.inventory_path), timeout=3600)
    seconds = time.monotonic() - start
    print(done.stdout[-6000:])
    dump = re.search(r"database dump:\s+(\S+)", done.stdout)
    assert dump, f"no dump path in the output:\n{done.stdout[-2000:]}"
    print(f"upgrade: to {target} in {seconds:.0f} s")
    return seconds, dump.group(1)


def _check_dump(view: ClusterView, path: str) -> None:
    host = view.database
    assert host is not None
    stat = view.run(host, f"stat -c '%a %U %s' {path}").stdout.split()
    assert stat[:2] == ["600", "root"], f"{path}: mode {stat[0]}, owner {stat[1]}"
    assert int(stat[2]) > 0
    assert view.run(host, f"grep -c 'CREATE TABLE' {path}").stdout.strip() != "0"


def test_upgrade_keeps_jobs_and_accounting(view: ClusterView) -> None:
    target, suite = _target()
    before = {host: _versions(view, host) for host in view.cluster.hosts}
    assert all(before.values()) and all(v != target for versions in before.values() for v in versions.values())
    finished = view.slurm("sbatch --parsable -N1 -o /dev/null --wrap true")
    view.wait_until(f"job {finished} completes", lambda: view.job(finished)["JobState"] == "COMPLETED", timeout=60)
    # the new release's packages become available to the hosts (the mirror gains a suite)
    _edit_inventory(view.inventory_path, 'suites: ["./"]', f'suites: ["./", "{suite}"]')
    view.deploy("--full")
    old_version = view.cluster.inventory.slurm.version or ""
    _edit_inventory(view.inventory_path, f'version: "{old_version}"', f'version: "{target}"')
    running, pending = _submit_jobs(view)
    started = view.job(running)["StartTime"]
    accounted = _accounted_jobs(view)
    assert {finished, running} <= accounted

    seconds, dump = _upgrade(view, target)

    after = {host: _versions(view, host) for host in view.cluster.hosts}
    assert all(set(after[h]) == set(before[h]) and set(after[h].values()) == {target} for h in after), after
    assert not [line for host in view.cluster.hosts for line in _replaced_binaries(view, host)]
    assert view.job(running)["JobState"] == "RUNNING" and view.job(running)["StartTime"] == started
    assert view.job(pending)["JobState"] == "PENDING"
    view.run(view.submit, f"touch {GO}")
    view.wait_until(f"job {pending} completes after {running}",
                    lambda: view.job(pending)["JobState"] == "COMPLETED", timeout=180)
    states = dict(line.split("|", 1) for line in view.slurm(
        f"sacct -n -X -P -j {running},{pending} -o JobID,State,ExitCode").splitlines())
    lost = [job for job in (running, pending) if states.get(job) != "COMPLETED|0:0"]
    assert accounted <= _accounted_jobs(view), "accounting records from before the upgrade are missing"
    _check_dump(view, dump)
    assert "26.05" not in target or target.split("-")[0] in view.slurm(f"cat {SHARED}/upgrade-pending.out")
    released, stuck = _nodes_released(view, [running, pending])
    _report(target, before, seconds, lost, states, released)
    assert not lost, f"jobs not completed normally: {states}"
    assert stuck is None, stuck
    plan = view.cli("plan", "--json", "--build-dir", str(view.build_dir), str(view.inventory_path), check=False)
    packages = [change for change in json.loads(plan.stdout)["changes"] if change["impact"] == "package change"]
    assert not packages, f"the inventory's slurm.version and the hosts disagree after the upgrade: {packages}"


def _nodes_released(view: ClusterView, jobs: list[str]) -> tuple[str, str | None]:
    """How the nodes became idle after the jobs (for the report), and why not when they did not:
    every node idle by itself within IDLE_AFTER_JOBS_S of the last job's end, no second restart
    (issue 32: the "mixed" nodes once seen here were a stale one-node answer, conftest's node_states)."""
    try:
        took = view.assert_nodes_idle_after(jobs)
    except pytest.fail.Exception as failed:
        return f"not idle within {IDLE_AFTER_JOBS_S} s of the jobs' end", str(failed)
    return f"idle {took:.0f} s after the jobs completed", None


def _report(target: str, before: dict[str, dict[str, str]], seconds: float, lost: list[str],
            states: dict[str, str], released: str) -> None:
    report = {"to": target, "from": sorted({v for versions in before.values() for v in versions.values()}),
              "hosts": len(before), "upgrade_seconds": round(seconds, 1), "jobs_lost": len(lost), "jobs": states,
              "nodes_after_the_jobs": released,
              "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(f"upgrade: {json.dumps(report, sort_keys=True)}")
    directory = os.environ.get("CLUSTER_TB_REPORT_DIR")
    if directory:
        Path(directory, "upgrade.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
