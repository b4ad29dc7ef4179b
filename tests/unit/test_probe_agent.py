"""The probe agent on this machine's real files, processes and package database."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster_cli.probe import AGENT_SOURCE, agent


def test_a_file_answers_its_checksum_and_its_text_only_when_it_differs(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=a\n")
    digest = hashlib.sha256(b"ClusterName=a\n").hexdigest()
    assert agent.file_facts({"path": str(conf), "want": digest}) == {"sha256": digest}
    assert agent.file_facts({"path": str(conf), "want": "0" * 64})["text"] == "ClusterName=a\n"
    assert agent.file_facts({"path": str(tmp_path / "absent"), "want": digest}) == {"absent": True}


def test_a_container_image_is_a_directory_with_a_bin(tmp_path: Path) -> None:
    image = tmp_path / "rootfs"
    (image / "bin").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    answer = agent.probe({"images": [str(image), str(tmp_path / "empty"), str(tmp_path / "absent")]})["images"]
    assert answer == {str(image): True, str(tmp_path / "empty"): False, str(tmp_path / "absent"): False}


def test_a_secret_file_never_sends_its_text(tmp_path: Path) -> None:
    key = tmp_path / "munge.key"
    key.write_bytes(b"secret-bytes")
    answer = agent.file_facts({"path": str(key), "want": "0" * 64, "secret": True})
    assert set(answer) == {"sha256"}


def test_a_running_process_answers_its_pid_and_start_time(tmp_path: Path) -> None:
    pidfile = tmp_path / "x.pid"
    pidfile.write_text(f"{os.getpid()}\n")
    facts = agent.process_facts(str(pidfile), agent._boot_time())
    assert facts["running"] and facts["pid"] == os.getpid()
    assert facts["started"] <= time.time() + 1


def test_a_stale_pidfile_is_not_running(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    pidfile = tmp_path / "x.pid"
    pidfile.write_text(str(child.pid))
    assert agent.process_facts(str(pidfile), agent._boot_time())["running"] is False
    assert agent.process_facts(str(tmp_path / "none.pid"), 0.0)["running"] is False


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="needs dpkg (Debian)")
def test_package_versions_come_from_dpkg() -> None:
    versions = agent.package_versions(["dpkg", "no-such-package-xyz"])
    assert versions["dpkg"] and versions["no-such-package-xyz"] is None


def test_the_agent_runs_as_a_script_with_the_request_in_argv(tmp_path: Path) -> None:
    conf = tmp_path / "c"
    conf.write_text("x")
    request = {"files": [{"path": str(conf), "want": None}], "pidfiles": {}, "packages": [], "controller": None}
    done = subprocess.run([sys.executable, "-", json.dumps(request)], input=AGENT_SOURCE, capture_output=True,
                          text=True, check=True)
    assert json.loads(done.stdout)["files"][str(conf)]["text"] == "x"


def test_the_agent_imports_only_the_standard_library() -> None:
    tree = ast.parse(AGENT_SOURCE)
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_a_daemon_without_a_pid_file_is_found_by_its_command_line(tmp_path: Path) -> None:
    # Slurm 24.11+ under systemd writes no pid file: slurmd@NODE is the `slurmd ... -N NODE` process
    fake = f"{tmp_path}/slurmd"  # argv[0] only: the program is this Python
    child = subprocess.Popen(["bash", "-c", f'exec -a {fake} {sys.executable} -c "import time; time.sleep(30)" -N nodeX'])
    try:
        time.sleep(0.3)
        facts = agent.process_facts(str(tmp_path / "absent.pid"), agent._boot_time(), "slurmd@nodeX")
        assert facts["running"] and facts["pid"] == child.pid
        assert not agent.process_facts(str(tmp_path / "absent.pid"), 0.0, "slurmd@nodeY")["running"]
    finally:
        child.kill()
        child.wait()
