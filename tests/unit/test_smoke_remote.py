"""The remote smoke run: what is copied to the submit host, how ssh is called (cluster_cli.ssh), the JSON protocol."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import tarfile
from pathlib import Path

import pytest

from cluster_cli.errors import ClusterCliError
from cluster_cli.loader import load_cluster, load_cluster_text
from cluster_cli.smoke import CheckResult, SmokeReport, SmokeTarget, Verdict
from cluster_cli.smoke.on_submit_host import target_from_dict
from cluster_cli.smoke_control.remote import bundle, submit_host
from cluster_cli.ssh import ssh_argv

REPO = Path(__file__).resolve().parents[2]

MULTI_HOST = """
cluster_name: mh
ssh:
  user: admin
  port: 2222
  private_key: /keys/id_ed25519
  common_args: "-o ProxyCommand='nc %h %p' -o StrictHostKeyChecking=yes"
hosts:
  - {name: ctl, address: 10.0.0.1}
  - {name: login1, address: 10.0.0.2}
controllers: {primary: ctl}
accounting: {enabled: false}
login: [login1]
node_groups:
  - {name: cpu, nodes: "c[1-2]", addresses: "10.0.0.[11-12]", cores_per_socket: 2, real_memory_mb: 1024}
partitions:
  - {name: debug, nodes: [cpu], default: true}
"""


def test_submit_host_is_the_first_login_host_else_the_controller() -> None:
    cluster = load_cluster_text(MULTI_HOST, "mh.yaml")
    assert submit_host(cluster).name == "login1"
    assert submit_host(cluster, "ctl").name == "ctl"
    with pytest.raises(ClusterCliError, match="no host 'nope'"):
        submit_host(cluster, "nope")
    local = load_cluster(REPO / "inventories/local/inventory.yaml")
    assert submit_host(local).connection == "local"


def test_ssh_argv_uses_the_inventory_settings_and_quotes_the_command() -> None:
    host = submit_host(load_cluster_text(MULTI_HOST, "mh.yaml"))
    argv = ssh_argv(host, ["env", "PYTHONPATH=/tmp/a b", "python3", "-c", "print('x; y')"])
    assert argv[:8] == ["ssh", "-o", "BatchMode=yes", "-p", "2222", "-l", "admin", "-i"]
    assert "ProxyCommand=nc %h %p" in argv and "StrictHostKeyChecking=yes" in argv
    assert argv[-3:-1] == ["10.0.0.2", "--"]
    # the remote shell splits the command back into exactly the argv given, run as root through
    # sudo (never a password prompt) since the SSH user is not root
    assert shlex.split(argv[-1]) == ["sudo", "-n", "--", "env", "PYTHONPATH=/tmp/a b", "python3", "-c", "print('x; y')"]


def test_ssh_argv_runs_the_command_itself_as_root() -> None:
    text = MULTI_HOST.replace("user: admin", "user: root")
    assert text != MULTI_HOST
    host = submit_host(load_cluster_text(text, "mh.yaml"))
    assert shlex.split(ssh_argv(host, ["id", "-u"])[-1]) == ["id", "-u"]


def test_report_survives_the_json_round_trip() -> None:
    result = CheckResult("srun", Verdict.FAIL, reason="node3 down", figure=1.5, figure_name="t", unit="s",
                         threshold=2.0, comparison="<=", duration_s=3.25, job_ids=["7"], output_tail="x",
                         details={"nodes": ["node3"]})
    report = SmokeReport([result], "2026-11-22T00:00:00+00:00", 4.5, {"nodes": ["node1"]}, "/srv/run-1")
    again = SmokeReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.to_dict() == report.to_dict()
    assert not again.ok and again.result("srun").reason == "node3 down"


def test_target_survives_the_trip_with_the_copied_training_dir(tmp_path: Path) -> None:
    target = SmokeTarget(nodes=["c1", "c2"], work_dir=Path("/srv/t"), partition="debug", gpus_per_node=1,
                         fake_gpus=True, accounting_enabled=True, user="smoke", thresholds={"copy_tbps": 1.0})
    again = target_from_dict(json.loads(json.dumps(target.summary())), tmp_path / "training")
    assert again.training_dir == tmp_path / "training"
    assert {**again.summary(), "training_dir": ""} == {**target.summary(), "training_dir": ""}


def test_bundle_runs_on_a_bare_python_with_the_standard_library_only(tmp_path: Path) -> None:
    target = SmokeTarget(nodes=["c1"], work_dir=tmp_path / "work")
    with tarfile.open(fileobj=io.BytesIO(bundle(target)), mode="r:gz") as archive:
        names = archive.getnames()
        archive.extractall(tmp_path / "bundle", filter="data")
    assert "cluster_cli/smoke/on_submit_host.py" in names and "target.json" in names
    assert "cluster_cli/node_states.py" in names  # the smoke package imports it
    assert "training/trainlib.py" in names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    # -I: no site-packages, no user paths: pydantic, click, rich are not reachable
    probe = subprocess.run(
        ["python3", "-I", "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); import cluster_cli.smoke.on_submit_host, json;"
         "print(json.load(open(sys.argv[1] + '/target.json'))['nodes'])",
         str(tmp_path / "bundle")],
        capture_output=True, text=True, check=False,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "['c1']"
