"""The job templates on the login host, run as the people who will run them: an unprivileged user
(alice, from the inventory's people) copies them from training.examples_dir and submits each one.

Every template runs, and its output is checked, not only its exit code: the chain's training on two
nodes (where containers are on, in the user's bundle of the cluster's image, made with the
container_bundle.py installed beside the templates: CONTAINER_BUNDLE) and its evaluation after it, the FSDP job's checkpoint on USR1, requeue and resume at the
same step, the sweep's results table against the tasks' own metrics, the interactive shell's
environment on a compute node. They share the three fake GPUs of the local cluster, so they are
submitted together and waited for together.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cluster_cli.loader import load_cluster
from cluster_cli.render.job_templates import template_partition
from cluster_cli.smoke.checks_training import REQUEUE_SETTLE_S, REQUEUE_START
from deployed import DeployedCluster, container_image, run_as, user_copy, wait_for

pytestmark = [pytest.mark.deploy, pytest.mark.training]

USER = "alice"
# lr 1e6 diverges: train.py exits 3, and those tasks are the sweep's failed rows.
SPACE = """\
[sweep]
method = "grid"
metric = "val_loss"
goal = "min"

[parameters]
lr = [0.03, 0.3, 1e6]
hidden = [16, 32]
steps = [60]
"""


def as_user(*argv: str, cwd: Path, timeout: float = 120, stdin: str | None = None) -> str:
    return run_as(USER, *argv, cwd=cwd, timeout=timeout, stdin=stdin)


def job_states(*jobs: str) -> dict[str, str]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,State", "-j", ",".join(jobs)],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split("|")[:2] for line in out.splitlines() if line)


def _expedite_requeued(job: str) -> bool:
    """Slurm holds a requeued job for its credentials' lifetime (120 s); as root, the test lets it
    start now instead (REQUEUE_SETTLE_S, REQUEUE_START, as the smoke suite's preempt check does).
    False: the wait goes on."""
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T %r"], capture_output=True, text=True, check=False).stdout
    if out.split() == ["PENDING", "BeginTime"]:
        time.sleep(REQUEUE_SETTLE_S)
        subprocess.run(["scontrol", "update", f"JobId={job}", f"StartTime={REQUEUE_START}"], check=True)
    return False


def queue_empty() -> bool:
    out = subprocess.run(["squeue", "-h", "-u", USER], capture_output=True, text=True, check=True).stdout
    return out.strip() == ""


@pytest.fixture(scope="module")
def copy(deployed_cluster: DeployedCluster) -> Path:
    """The user's own copy of the installed templates, in the user's home."""
    cluster = load_cluster(deployed_cluster.inventory)
    installed = Path(cluster.inventory.training.examples_dir)
    assert (installed / "ddp.sbatch").is_file() and (installed / "using-the-cluster.md").is_file()
    target = user_copy(USER, installed, "examples")
    (target / "test-space.toml").write_text(SPACE)
    shutil.chown(target / "test-space.toml", USER)
    return target


def test_the_templates_are_rendered_for_the_cluster(deployed_cluster: DeployedCluster, copy: Path) -> None:
    partition = template_partition(load_cluster(deployed_cluster.inventory))
    text = (copy / "ddp.sbatch").read_text()
    assert f"#SBATCH --partition={partition.name}\n" in text
    assert f"#SBATCH --gpus-per-node={partition.gpu_type}:{partition.gpus_per_node}" in text
    assert "{{" not in text and "{%" not in text


def test_interactive_session_on_a_compute_node_has_the_environment(copy: Path) -> None:
    probe = "python -c 'import os, torch; print(\"probe\", torch.__version__, os.environ[\"SLURMD_NODENAME\"])'\nexit\n"
    out = as_user("script", "-qec", "bash interactive.sh", "/dev/null", cwd=copy, stdin=probe, timeout=180)
    found = re.search(r"^probe (\S+) (node\d+)", out, re.MULTILINE)
    assert found, out[-2000:]


def _bundle(deployed_cluster: DeployedCluster, copy: Path) -> str | None:
    """The user's bundle of the cluster's image, made as a user would, from the templates' directory;
    None where containers are off."""
    cluster = load_cluster(deployed_cluster.inventory)
    if not cluster.inventory.containers.enabled:
        return None
    made = container_image(deployed_cluster)
    bundle = f"{copy}/bundle"
    as_user("python3", "container_bundle.py", "--image", str(made["rootfs"]), "--bundle", bundle, "--bind-home",
            cwd=copy)
    return bundle


def test_chain_fsdp_and_sweep_run_to_their_checked_results(deployed_cluster: DeployedCluster, copy: Path) -> None:
    bundle = _bundle(deployed_cluster, copy)
    in_bundle = [f"CONTAINER_BUNDLE={bundle}"] if bundle else []
    chained = as_user("env", *in_bundle, "bash", "chain.sh", "--steps", "100", cwd=copy)
    train_job, eval_job = re.findall(r"job (\d+)", chained)
    fsdp_job = as_user("sbatch", "--parsable", "fsdp.sbatch", "--steps", "40", "--checkpoint-every", "10",
                       "--pause", "0.5", cwd=copy).strip()
    swept = as_user("bash", "submit-sweep.sh", "test-space.toml", cwd=copy)
    sweep_job, collect_job = re.findall(r"job (\d+)", swept)

    fsdp_log = copy / f"fsdp-{fsdp_job}.out"
    wait_for(lambda: fsdp_log.is_file() and "checkpoint step-10 written" in fsdp_log.read_text(),
             "the FSDP job's first checkpoint")
    as_user("scancel", "--batch", "--signal=USR1", fsdp_job, cwd=copy)
    wait_for(lambda: _expedite_requeued(fsdp_job) or queue_empty(), "every job of the user to end")

    states = job_states(train_job, eval_job, fsdp_job, collect_job)
    assert all(states[job] == "COMPLETED" for job in (train_job, eval_job, fsdp_job, collect_job)), states
    _check_chain(copy, train_job, eval_job, bundle)
    _check_fsdp(fsdp_log.read_text())
    _check_sweep(copy, sweep_job)


def _check_chain(copy: Path, train_job: str, eval_job: str, bundle: str | None) -> None:
    train_log = (copy / f"ddp-{train_job}.out").read_text()
    # each torchrun ran in the bundle (srun --container), train.py found in the directory srun ran in
    container = subprocess.run(["sacct", "-n", "-P", "-o", "Container", "-j", f"{train_job}.0"],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert container == (bundle or ""), container
    ranks = re.findall(r"rank \d of 2 on (node\d), device \w+, (\d+) CPUs", train_log)
    assert len({node for node, _ in ranks}) == 2, train_log[-2000:]
    # srun passed the job's --cpus-per-task on (22.05's srun would give each torchrun one CPU)
    assert [cpus for _, cpus in ranks] == ["2", "2"], train_log[-2000:]
    metrics = json.loads(re.search(r"^metrics (.*)$", train_log, re.MULTILINE).group(1))
    assert metrics["world_size"] == 2 and metrics["accuracy"] > 0.6, metrics
    evaluated = re.search(r"^accuracy (\S+) on 5000", (copy / f"evaluate-{eval_job}.out").read_text())
    assert evaluated and float(evaluated.group(1)) > 0.6
    times = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "JobID,Start,End", "-j", f"{train_job},{eval_job}"],
                           capture_output=True, text=True, check=True).stdout
    rows = {line.split("|")[0]: line.split("|")[1:] for line in times.splitlines()}
    assert rows[eval_job][0] >= rows[train_job][1], rows  # ISO times: the evaluation started after


def _check_fsdp(log: str) -> None:
    stopped = re.search(r"stop requested: checkpoint step-(\d+) written", log)
    resumed = re.search(r"resumed from the checkpoint of step (\d+)", log)
    assert stopped and resumed and stopped.group(1) == resumed.group(1), log[-3000:]
    assert "run 1 of job" in log and "finished: step 40" in log, log[-3000:]


def _check_sweep(copy: Path, sweep_job: str) -> None:
    run_dir = copy / f"sweep-{sweep_job}"
    rows = list(csv.DictReader((run_dir / "results.csv").open()))
    assert sorted(int(row["task"]) for row in rows) == list(range(6)), rows
    ok = [row for row in rows if row["status"] == "ok"]
    failed = [row for row in rows if row["status"] == "failed"]
    assert {row["lr"] for row in failed} == {"1e+06"} and len(failed) == 2, rows
    assert all(Path(row["log"]).is_file() and "diverged" in Path(row["log"]).read_text() for row in failed)
    measured = {int(task.name[5:]): json.loads((task / "metrics.json").read_text())["val_loss"]
                for task in run_dir.glob("task-*") if (task / "metrics.json").is_file()}
    assert [int(row["task"]) for row in ok] == sorted(measured, key=lambda task: (measured[task], task))
    assert all(math.isclose(float(row["val_loss"]), measured[int(row["task"])], rel_tol=1e-5) for row in ok)
    assert ok[0]["rank"] == "1" and (run_dir / "results.md").read_text().count("\n|") >= 7
