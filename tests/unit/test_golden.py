"""Golden files: what cluster-cli renders for every shipped inventory, byte for byte.

The files under tests/unit/golden/<inventory>/ are the specification of the rendered configs;
they were reviewed line by line against the field notes and Slurm's documentation. A change in
a renderer that alters them fails here, and the diff is the review.

Regenerate them after an intended change, then read the diff before committing it:

    UPDATE_GOLDEN=1 pytest tests/unit/test_golden.py
    git diff tests/unit/golden/

Each golden file is the build-directory path plus ``.golden`` (``slurm/slurm.conf.golden``,
``ansible/inventory.yml.golden``), so that yamllint and ansible-lint leave them alone. The health
check's document (health/expectations.json) is kept as the files the hosts receive from it,
``health/HOST.json``: each compute host's text (test_health_conf.py checks the document).

The database password is fixed (GOLDEN_PASSWORD) and HOME is /home/operator, so that
``~/.ssh/...`` key paths in the Ansible inventory do not depend on who runs the tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from unit_helpers import SHIPPED_INVENTORIES

from cluster_cli.loader import load_cluster
from cluster_cli.render import render_configs
from cluster_cli.render.ansible_inventory import render_ansible_inventory
from cluster_cli.render.health_conf import HEALTH_BUILD_DIR, HEALTH_DOCUMENT, with_host_health_texts
from cluster_cli.render.job_templates import BUNDLE_TOOL, EXAMPLES_BUILD_DIR, GUIDE
from cluster_cli.render.monitoring import EXPORTER_BUILD_DIR

GOLDEN = Path(__file__).resolve().parent / "golden"
EXAMPLES_SOURCE = Path(__file__).resolve().parents[2] / "training" / "examples"
GOLDEN_PASSWORD = "golden-Test_password-0123456789"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
SUFFIX = ".golden"


def rendered(name: str) -> dict[str, str]:
    cluster = load_cluster(SHIPPED_INVENTORIES[name])
    files = {item.path: item.content for item in render_configs(cluster, GOLDEN_PASSWORD)}
    files["ansible/inventory.yml"] = render_ansible_inventory(cluster)
    document = f"{HEALTH_BUILD_DIR}/{HEALTH_DOCUMENT}"
    for path, text in with_host_health_texts(files, cluster).items():
        if path.startswith(f"{document}:"):
            files[f"{HEALTH_BUILD_DIR}/{path.split(':', 1)[1]}.json"] = text
    files.pop(document, None)
    # the job templates the renderer only copies (train.py, the guide ...) are their sources, byte
    # for byte (test_job_templates.py): the goldens keep the rendered ones
    copied = {f"{EXAMPLES_BUILD_DIR}/{path.name}" for path in EXAMPLES_SOURCE.iterdir() if path.suffix != ".j2"}
    # so are the Slurm exporter's modules (test_monitoring.py) and the bundle tool (test_job_templates.py)
    copied |= {f"{EXAMPLES_BUILD_DIR}/{GUIDE}", f"{EXAMPLES_BUILD_DIR}/{BUNDLE_TOOL}"}
    return {path: text for path, text in files.items()
            if path not in copied and not path.startswith(f"{EXPORTER_BUILD_DIR}/")}


def golden_files(name: str) -> dict[str, str]:
    directory = GOLDEN / name
    return {
        str(path.relative_to(directory)).removesuffix(SUFFIX): path.read_text(encoding="utf-8")
        for path in sorted(directory.rglob(f"*{SUFFIX}"))
        if path.is_file()
    }


@pytest.fixture(autouse=True)
def fixed_home(monkeypatch):
    monkeypatch.setenv("HOME", "/home/operator")


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_rendered_files_match_the_golden_files(name):
    files = rendered(name)
    if UPDATE:
        directory = GOLDEN / name
        for path in directory.rglob("*") if directory.exists() else []:
            if path.is_file():
                path.unlink()
        for relative, content in files.items():
            target = directory / f"{relative}{SUFFIX}"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
    expected = golden_files(name)
    assert sorted(files) == sorted(expected), "a file appeared or disappeared: UPDATE_GOLDEN=1 and review"
    for relative in expected:
        assert files[relative] == expected[relative], f"{name}/{relative} differs from its golden file"


def test_every_shipped_inventory_has_goldens_and_no_stale_ones_are_left():
    assert sorted(path.name for path in GOLDEN.iterdir() if path.is_dir()) == sorted(SHIPPED_INVENTORIES)


def test_expected_files_per_inventory():
    assert sorted(golden_files("local")) == [
        "ansible/inventory.yml",
        "examples/README.md",
        "examples/ddp.sbatch",
        "examples/evaluate.sbatch",
        "examples/fsdp.sbatch",
        "examples/interactive.sh",
        "examples/submit-sweep.sh",
        "examples/sweep.sbatch",
        "health/localhost.json",
        "monitoring/cluster-alerts.yml",
        "monitoring/consoles/cluster-gpus.html",
        "monitoring/consoles/cluster-slurm.html",
        "monitoring/grafana/cluster-gpus.json",
        "monitoring/grafana/cluster-slurm.json",
        "monitoring/prometheus.yml",
        "nccl/nccl.conf",
        "slurm/cgroup.conf",
        "slurm/gres.conf",
        "slurm/oci.conf",
        "slurm/slurm.conf",
        "slurm/slurmdbd.conf",
    ]
    assert "slurm/topology.conf" in golden_files("gpu-cluster")
    # containers.enabled: oci.conf only where the inventory turns containers on
    assert "slurm/oci.conf" not in golden_files("gpu-cluster")
