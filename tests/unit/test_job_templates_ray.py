"""training.ray_version: Ray in the training environment (off by default) and its job template,
ray.sbatch with ray_tasks.py, rendered only for a cluster that has Ray. tests/deploy/test_56_ray.py
runs it on the local cluster (opt-in: CLUSTER_TEST_RAY=1)."""

from __future__ import annotations

import py_compile
import re
import subprocess
from pathlib import Path

import pytest
from unit_helpers import SHIPPED_INVENTORIES

from cluster_cli.ansible.variables import cluster_variables
from cluster_cli.bundle.packages import pip_requirements
from cluster_cli.errors import InventoryError
from cluster_cli.loader import load_cluster, load_cluster_text
from cluster_cli.render.job_templates import render_job_templates
from cluster_cli.secrets_store import ensure_secrets

REPO = Path(__file__).resolve().parents[2]
LOCAL = (REPO / "inventories" / "local" / "inventory.yaml").read_text()
RAY = "2.60.0"


def _with_ray(version: str | None = RAY) -> str:
    assert "\ntraining:\n" in LOCAL
    value = "null" if version is None else f'"{version}"'
    return LOCAL.replace("\ntraining:\n", f"\ntraining:\n  ray_version: {value}\n", 1)


def _files(text: str) -> dict[str, str]:
    cluster = load_cluster_text(text, "inv.yaml")
    return {path.removeprefix("examples/"): body for path, body, _ in render_job_templates(cluster)}


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_no_shipped_inventory_has_ray_and_none_gets_its_template(name: str) -> None:
    cluster = load_cluster(SHIPPED_INVENTORIES[name])
    assert cluster.inventory.training.ray_version is None
    names = {path.removeprefix("examples/") for path, _, _ in render_job_templates(cluster)}
    assert not names & {"ray.sbatch", "ray_tasks.py"}, names


def test_with_ray_version_the_template_and_its_program_are_rendered_and_listed(tmp_path: Path) -> None:
    files = _files(_with_ray())
    assert {"ray.sbatch", "ray_tasks.py"} <= set(files)
    assert files["ray_tasks.py"] == (REPO / "training" / "examples" / "ray_tasks.py").read_text()
    assert "| `ray.sbatch`, `ray_tasks.py` | a Ray cluster (Ray 2.60.0) over the job's nodes" in files["README.md"]
    assert "(Python with torch and Ray)" in files["README.md"]
    without = _files(_with_ray(None))
    assert "ray.sbatch" not in without["README.md"] and "(Python with torch)" in without["README.md"]


def test_ray_sbatch_parses_and_asks_for_the_partition_like_the_others(tmp_path: Path) -> None:
    text = _files(_with_ray())["ray.sbatch"]
    assert "{{" not in text and "{%" not in text
    script = tmp_path / "ray.sbatch"
    script.write_text(text)
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert checked.returncode == 0, checked.stderr
    program = tmp_path / "ray_tasks.py"
    program.write_text(_files(_with_ray())["ray_tasks.py"])
    py_compile.compile(str(program), doraise=True)
    assert "#SBATCH --partition=debug\n#SBATCH --gpus-per-node=fake:1  # fake GPUs\n" in text
    assert "#SBATCH --cpus-per-task=2  # for the Ray node (raylet, object store, workers) on each node\n" in text
    assert "source /opt/cluster-training/venv/bin/activate\n" in text
    # every Ray node its own ports and temporary directory; no usage statistics sent anywhere
    for option in ("--node-manager-port", "--object-manager-port", "--metrics-export-port",
                   "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port",
                   "--min-worker-port=0", "--max-worker-port=0", "--temp-dir=", "--disable-usage-stats"):
        assert option in text, option
    assert "RAY_USAGE_STATS_ENABLED=0" in text and "--include-dashboard=false" in text
    # only the job may use its Ray cluster: a token of its own; and no `ray stop` (it stops another job's Ray too)
    assert "export RAY_AUTH_MODE=token\n" in text and "export RAY_AUTH_TOKEN\n" in text
    assert not re.search(r"^[^#]*\bray stop\b", text, re.MULTILINE)
    # the torch templates' comment is theirs alone
    assert "torchrun" in _files(_with_ray())["ddp.sbatch"].split("--cpus-per-task=")[1].split("\n")[0]


def _ports(job: int, index: int) -> list[int]:
    base = 10000 + (job * 16 + index) % 1200 * 8
    return list(range(base, base + 8))


@pytest.mark.parametrize("job", [1, 75, 1199, 4242, 99_999])
def test_the_ray_nodes_of_a_job_never_share_a_port_and_stay_below_torchruns(job: int) -> None:
    text = _files(_with_ray())["ray.sbatch"]
    assert re.search(r"base_port\(\) \{ echo \$\(\(10000 \+ \(SLURM_JOB_ID \* 16 \+ \$1\) % 1200 \* 8\)\); \}", text)
    used = [port for index in range(16) for port in _ports(job, index)]
    assert len(used) == len(set(used)) and 10000 <= min(used) and max(used) < 20000


def test_ray_is_installed_and_bundled_only_when_asked_for(tmp_path: Path) -> None:
    secrets = ensure_secrets(tmp_path / "secrets")
    with_ray = load_cluster_text(_with_ray(), "inv.yaml")
    without = load_cluster_text(LOCAL, "inv.yaml")
    assert cluster_variables(with_ray, Path("/build"), secrets)["training_env_ray_version"] == RAY
    assert cluster_variables(without, Path("/build"), secrets)["training_env_ray_version"] == ""
    assert f"ray=={RAY}" in pip_requirements(with_ray)
    assert not any(pin.startswith("ray==") for pin in pip_requirements(without))


@pytest.mark.parametrize("version", ["latest", "2.60.0; rm -rf /", "", ">=2.60", "v2.60.0"])
def test_a_ray_version_must_look_like_one(version: str) -> None:
    with pytest.raises(InventoryError, match=r"training\.ray_version"):
        load_cluster_text(_with_ray(version), "inv.yaml")


def test_a_local_build_of_ray_is_a_version_too() -> None:
    cluster = load_cluster_text(_with_ray("2.60.0+cpu"), "inv.yaml")
    assert cluster.inventory.training.ray_version == "2.60.0+cpu"
