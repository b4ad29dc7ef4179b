"""The job templates (training/examples) as render/job_templates makes them for an inventory:
which partition and GPUs they ask for, what is copied as it is, and that every script parses.
tests/deploy/test_55_examples.py runs them on the local cluster."""

from __future__ import annotations

import py_compile
import subprocess
from pathlib import Path

import pytest
from unit_helpers import SHIPPED_INVENTORIES, local_cluster

from cluster_cli.loader import load_cluster
from cluster_cli.errors import InventoryError
from cluster_cli.render.job_templates import (
    BUNDLE_TOOL,
    GUIDE,
    ONLY_WITH,
    light_partition,
    one_gpu_partition,
    render_job_templates,
    template_partition,
)

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "training" / "examples"


def _files(cluster) -> dict[str, str]:
    return {path.removeprefix("examples/"): text for path, text, _ in render_job_templates(cluster)}


def test_files_without_the_template_suffix_are_copied_byte_for_byte(tmp_path: Path) -> None:
    files = _files(local_cluster(tmp_path))
    copied = [path for path in SOURCE.iterdir()
              if path.suffix != ".j2" and not path.name.startswith("_") and path.name not in ONLY_WITH]
    assert copied and all(files[path.name] == path.read_text() for path in copied)
    assert files[GUIDE] == (REPO / "docs" / GUIDE).read_text()
    assert files[BUNDLE_TOOL] == (REPO / "training" / BUNDLE_TOOL).read_text()  # the local cluster has containers on
    assert not any(name.startswith("_") or name.endswith(".j2") for name in files)


# srun and scontrol stand-ins: the srun line of a rendered template is what the tests read.
STAND_INS = """
scontrol() { case $2 in hostnames) echo node1 ;; *) echo "NodeName=node1 NodeAddr=10.0.0.1" ;; esac; }
srun() { echo "srun $*"; }
"""


def _srun_words(text: str, tmp_path: Path, **env: str) -> list[str]:
    """The words of the srun line the rendered batch script ``text`` runs (its venv and torchrun not needed)."""
    script = tmp_path / "job.sbatch"
    script.write_text(text.replace("source ", ": ", 1))
    done = subprocess.run(
        ["bash", "-c", f'{STAND_INS}\nsource "{script}"'], capture_output=True, text=True, timeout=30, check=True,
        env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "node[1-2]",
             "SLURM_CPUS_PER_TASK": "2", **env},
    )
    return next(line for line in done.stdout.splitlines() if line.startswith("srun ")).split()


def test_with_containers_on_a_bundle_runs_each_torchrun_in_the_image(tmp_path: Path) -> None:
    """CONTAINER_BUNDLE=DIR adds srun --container; without it the job runs on the nodes as before."""
    ddp = _files(local_cluster(tmp_path))["ddp.sbatch"]
    assert "--container=/home/alice/bundles/training" in _srun_words(ddp, tmp_path, CONTAINER_BUNDLE="/home/alice/bundles/training")
    assert not any(word.startswith("--container") for word in _srun_words(ddp, tmp_path))


def test_with_containers_off_no_bundle_tool_and_no_container_option(tmp_path: Path) -> None:
    files = _files(local_cluster(tmp_path, lambda text: text.replace("containers:\n  enabled: true", "containers:\n  enabled: false")))
    assert BUNDLE_TOOL not in files
    assert "CONTAINER_BUNDLE" not in files["ddp.sbatch"] + files["fsdp.sbatch"] + files["README.md"]


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_every_script_parses_and_nothing_is_left_unrendered(name: str, tmp_path: Path) -> None:
    for file, text in _files(load_cluster(SHIPPED_INVENTORIES[name])).items():
        assert "{{" not in text.replace("${{", "") and "{%" not in text, file
        target = tmp_path / file
        target.write_text(text)
        if file.endswith((".sh", ".sbatch")):
            checked = subprocess.run(["bash", "-n", str(target)], capture_output=True, text=True, check=False)
            assert checked.returncode == 0, f"{name}/{file}: {checked.stderr}"
        elif file.endswith(".py"):
            py_compile.compile(str(target), doraise=True)


def test_the_templates_ask_for_the_default_partitions_gpus_by_type(tmp_path: Path) -> None:
    cluster = local_cluster(tmp_path)
    files = _files(cluster)
    assert "#SBATCH --partition=debug\n#SBATCH --gpus-per-node=fake:1  # fake GPUs\n" in files["ddp.sbatch"]
    assert "#SBATCH --gpus=fake:1\n#SBATCH --cpus-per-task=2\n" in files["sweep.sbatch"]
    assert "#SBATCH --time=00:30:00" in files["fsdp.sbatch"]
    assert "source /opt/cluster-training/venv/bin/activate" in files["ddp.sbatch"]
    assert "| `debug` (default) | 3 | 1 x fake | 2 | 01:00:00 |" in files["README.md"]


def test_a_default_partition_without_gpus_gives_way_to_one_with_them(tmp_path: Path) -> None:
    def edit(text: str) -> str:
        text = text.replace("node_groups:\n", "node_groups:\n  - name: cpu\n    nodes: cpu1\n    host: localhost\n"
                            "    base_port: 17010\n    cores_per_socket: 4\n    real_memory_mb: 1024\n")
        return text.replace("  - name: debug\n    nodes: [local]\n    default: true\n    max_time: \"01:00:00\"\n",
                            "  - name: cpu\n    nodes: [cpu]\n    default: true\n"
                            "  - name: gpu\n    nodes: [local]\n    max_time: \"00:10:00\"\n")

    partition = template_partition(local_cluster(tmp_path, edit))
    assert (partition.name, partition.gpu_request, partition.time_limit) == ("gpu", "fake:1", "00:10:00")


def test_a_cluster_without_gpus_runs_the_templates_on_cpus(tmp_path: Path) -> None:
    def cpu_only(text: str) -> str:
        start = text.index("    gpus:\n")
        end = text.index("      fake: true\n") + len("      fake: true\n")
        return text[:start] + text[end:]

    cluster = local_cluster(tmp_path, cpu_only)
    partition = template_partition(cluster)
    assert (partition.gpus_per_node, partition.gpu_request, partition.cpus_per_gpu) == (0, "", 2)
    files = _files(cluster)
    assert not any("--gpus" in line for line in files["ddp.sbatch"].splitlines() if line.startswith("#SBATCH"))
    assert "--gpus" not in files["interactive.sh"].split("exec salloc", 1)[1]
    assert "(2 CPUs per node, no GPUs)" in files["README.md"]


def test_the_nccl_settings_are_listed_where_the_templates_use_gpus() -> None:
    files = _files(load_cluster(SHIPPED_INVENTORIES["gpu-cluster"]))
    assert "#   NCCL_SOCKET_IFNAME=bond0\n" in files["ddp.sbatch"]
    assert "# NCCL reads /etc/nccl.conf on every node" in files["fsdp.sbatch"]


def test_jobs_of_one_gpu_avoid_a_partition_that_gives_nodes_whole() -> None:
    cluster = load_cluster(SHIPPED_INVENTORIES["gpu-cluster"])
    # train (the default, OverSubscribe=EXCLUSIVE) for the jobs over several nodes; one GPU of
    # its nodes would hold a node of eight
    assert [item.oversubscribe for item in cluster.inventory.partitions if item.name == "train"] == ["EXCLUSIVE"]
    assert (template_partition(cluster).name, one_gpu_partition(cluster).name, light_partition(cluster)) == (
        "train", "debug", "cpu")
    files = _files(cluster)
    assert "#SBATCH --partition=debug\n" in files["sweep.sbatch"] and "--partition=debug " in files["interactive.sh"]
    assert "#SBATCH --partition=debug\n" in files["evaluate.sbatch"] and "--partition=cpu " in files["submit-sweep.sh"]
    assert "#SBATCH --partition=train\n" in files["ddp.sbatch"]


@pytest.mark.parametrize("examples_dir", ["/opt/cluster-training", "/opt/cluster-training/venv",
                                          "/opt/cluster-training/venv/examples", "/srv/cluster-training"])
def test_the_examples_directory_holds_nothing_else_the_deploy_made(tmp_path: Path, examples_dir: str) -> None:
    # roles/login removes the files there that the build lacks
    with pytest.raises(InventoryError, match=r"inventory.yaml:\d+: training.examples_dir: must be a directory of its own"):
        local_cluster(tmp_path, lambda text: text.replace(
            "  work_dir: /srv/cluster-training\n", f"  work_dir: /srv/cluster-training\n  examples_dir: {examples_dir}\n"))
