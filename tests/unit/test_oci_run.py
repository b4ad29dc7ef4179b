"""The container start on compute hosts (roles/slurmd/files/cluster-cli-oci-run, oci.conf's RunTimeRun):
the step's config.json gets this node's GPU device files and the task's GPU variables, then the
runtime runs. Real runc runs it in tests/training/test_container_tools.py; the local cluster's smoke
check `container` runs it under Slurm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

import pytest
from unit_helpers import REPO

from cluster_cli import hostlist

SCRIPT = REPO / "roles" / "slurmd" / "files" / "cluster-cli-oci-run"


def load_script() -> ModuleType:
    loader = SourceFileLoader("cluster_cli_oci_run", str(SCRIPT))
    module = ModuleType(loader.name)
    loader.exec_module(module)
    return module


oci_run = load_script()

GRES = """\
# gres.conf for cluster 'test'.
NodeName=gpu[1-4] Name=gpu Type=a100 File=/dev/nvidia[0-1]
NodeName=dev1 Name=gpu Type=fake File=/dev/fake-gpu/nvidia0
NodeName=dev2 Name=gpu Type=fake File=/dev/fake-gpu/nvidia[1-2]
NodeName=big[01-02] AutoDetect=nvml
"""


def _records(text: str = GRES) -> list[dict[str, str]]:
    return [record for record in map(_record, text.splitlines()) if record]


def _record(line: str) -> dict[str, str]:
    words = line.split("#", 1)[0].split()
    return {key.lower(): value for key, value in (word.split("=", 1) for word in words if "=" in word)}


@pytest.mark.parametrize("expression", [
    "node1", "gpu[1-4]", "gpu[001-128]", "a[1-2]b[3-4]", "n[1,3,5-6],m2", "/dev/nvidia[0-7]",
    "10.1.[0-1].[1-3]", "big[01-02],small[9-11]",
])
def test_hostlists_expand_as_cluster_cli_writes_them(expression: str) -> None:
    assert oci_run.expand(expression) == hostlist.expand(expression)


def test_gres_conf_is_read_with_its_comments_and_case(tmp_path: Path) -> None:
    path = tmp_path / "gres.conf"
    path.write_text(GRES.replace("Name=gpu Type=fake", "name=GPU type=fake", 1))
    assert oci_run.read_gres(str(path)) == _records(GRES.replace("Name=gpu Type=fake", "name=GPU type=fake", 1))
    assert oci_run.gpu_files(oci_run.read_gres(str(path)), "dev1")[0] == ["/dev/fake-gpu/nvidia0"]


@pytest.mark.parametrize(("node", "own"), [
    ("gpu3", ["/dev/nvidia0", "/dev/nvidia1"]),
    ("dev1", ["/dev/fake-gpu/nvidia0"]),
    ("dev2", ["/dev/fake-gpu/nvidia1", "/dev/fake-gpu/nvidia2"]),
    ("cpu1", []),
])
def test_a_node_gets_its_own_gpu_files_and_knows_every_nodes(node: str, own: list[str]) -> None:
    found, every = oci_run.gpu_files(_records(), node)
    assert found == own
    assert every == ["/dev/nvidia0", "/dev/nvidia1", "/dev/fake-gpu/nvidia0", "/dev/fake-gpu/nvidia1",
                     "/dev/fake-gpu/nvidia2"]


def test_an_autodetected_node_gets_the_hosts_gpu_files_in_number_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oci_run.glob, "glob", lambda pattern: ["/dev/nvidia10", "/dev/nvidia2", "/dev/nvidia1"])
    assert oci_run.gpu_files(_records(), "big01")[0] == ["/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia10"]


def _config(*devices: str) -> dict:
    return {
        "mounts": [
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]},
            {"destination": "/home/alice", "type": "bind", "source": "/home/alice", "options": ["rbind", "rw"]},
            {"destination": "/dev/infiniband", "type": "bind", "source": "/dev/infiniband", "options": ["rbind"]},
            *({"destination": path, "type": "bind", "source": path, "options": ["bind", "rw"]} for path in devices),
        ],
        "process": {"env": ["PATH=/usr/bin", "CUDA_VISIBLE_DEVICES=4,5", "SLURM_GPUS_ON_NODE=2"]},
    }


def test_the_bundle_makers_gpu_files_give_way_to_the_nodes(tmp_path: Path) -> None:
    """A bundle made on an 8-GPU host (and another node's file) runs on a node whose one GPU is
    ``mine``; every other mount stays as it was."""
    mine = tmp_path / "nvidia0"
    mine.touch()
    maker = [f"/dev/nvidia{index}" for index in range(8)] + ["/dev/nvidiactl", "/dev/fake-gpu/nvidia2"]
    config = oci_run.fit(_config(*maker), [str(mine)], ["/dev/fake-gpu/nvidia2", str(mine)], {})
    destinations = [mount["destination"] for mount in config["mounts"]]
    # /dev/nvidiactl and the other control files are bound only where the host has them
    assert destinations == ["/dev", "/home/alice", "/dev/infiniband", str(mine)]
    assert config["mounts"][-1] == {"destination": str(mine), "type": "bind", "source": str(mine),
                                    "options": ["bind", "rw"]}


def test_a_node_without_gpus_gets_none_of_the_bundles() -> None:
    config = oci_run.fit(_config("/dev/nvidia0"), [], ["/dev/nvidia0"], {"SLURMD_NODENAME": "cpu1"})
    assert [mount["destination"] for mount in config["mounts"]] == ["/dev", "/home/alice", "/dev/infiniband"]
    assert config["process"]["env"] == ["PATH=/usr/bin", "CUDA_VISIBLE_DEVICES=4,5", "SLURM_GPUS_ON_NODE=2",
                                        "SLURMD_NODENAME=cpu1"]


@pytest.mark.parametrize(("usable", "expected"), [
    ({"/g/0", "/g/2"}, ["CUDA_VISIBLE_DEVICES=0,1", "SLURM_GPUS_ON_NODE=2"]),
    (set(), []),
])
def test_the_gpu_variables_count_the_files_the_steps_device_cgroup_lets_it_use(
    monkeypatch: pytest.MonkeyPatch, usable: set[str], expected: list[str]
) -> None:
    """Local indices, as Slurm gives them with ConstrainDevices; the job's inherited values never stay."""
    monkeypatch.setattr(oci_run.os, "access", lambda path, mode: path in usable)
    environment = oci_run.task_environment("node1", ["/g/0", "/g/1", "/g/2"], gpu_env=True)
    config = oci_run.fit(_config(), ["/g/0", "/g/1", "/g/2"], [], environment)
    assert config["process"]["env"] == ["PATH=/usr/bin", "SLURMD_NODENAME=node1", *expected]


def test_without_local_indices_the_gpu_variables_are_left_alone() -> None:
    assert oci_run.task_environment("node1", ["/g/0"], gpu_env=False) == {"SLURMD_NODENAME": "node1"}


@pytest.mark.parametrize(("pwd", "cwd"), [
    ("/home/alice/examples", "/home/alice/examples"),  # below a directory the bundle binds: srun's
    ("/home/alice", "/home/alice"),
    ("/srv/elsewhere", "/home/alice"),  # not in the container: the bundle's stays (runc could not enter it)
    ("/usr/share", "/home/alice"),  # an image directory (bound from the image, not the host's): the bundle's
    (None, "/home/alice"),
])
def test_the_container_starts_where_srun_ran_where_the_bundle_has_that_directory(pwd: str | None, cwd: str) -> None:
    """Slurm 22.05 passes the step's working directory only as the job environment's PWD."""
    config = _config()
    config["mounts"].append({"destination": "/usr", "type": "bind", "source": "/images/training/rootfs/usr",
                             "options": ["rbind", "ro"]})
    config["process"]["cwd"] = "/home/alice"
    config["process"]["env"] += [f"PWD={pwd}"] if pwd else []
    assert oci_run.fit(config, [], [], {})["process"]["cwd"] == cwd


def _step(tmp_path: Path, gres: str = GRES) -> tuple[Path, Path]:
    """A step's directory as slurmstepd leaves it: config.json not writable, in a writable directory."""
    bundle = tmp_path / "oci-job00007-00000"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(_config("/dev/nvidia5")))
    (bundle / "config.json").chmod(0o440)
    gres_conf = tmp_path / "gres.conf"
    gres_conf.write_text(gres)
    return bundle, gres_conf


def _run(bundle: Path, gres_conf: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--bundle", str(bundle), "--node", "dev1", "--gres-conf", str(gres_conf),
         "--gpu-env", "--", *command],
        capture_output=True, text=True, timeout=30, check=False,
    )


def test_it_rewrites_the_steps_config_then_runs_the_runtime(tmp_path: Path) -> None:
    bundle, gres_conf = _step(tmp_path)
    done = _run(bundle, gres_conf, "cat", str(bundle / "config.json"))
    assert done.returncode == 0, done.stderr
    config = json.loads(done.stdout)
    assert "/dev/nvidia5" not in [mount["destination"] for mount in config["mounts"]]
    assert "SLURMD_NODENAME=dev1" in config["process"]["env"]
    assert [path.name for path in bundle.iterdir()] == ["config.json"]  # no temporary left


@pytest.mark.parametrize("breakage", ["no gres.conf", "config.json not JSON"])
def test_what_it_cannot_read_stops_the_container_with_the_reason(tmp_path: Path, breakage: str) -> None:
    bundle, gres_conf = _step(tmp_path)
    if breakage == "no gres.conf":
        gres_conf.unlink()
    else:
        (bundle / "config.json").chmod(0o640)
        (bundle / "config.json").write_text("{")
    marker = tmp_path / "ran"
    done = _run(bundle, gres_conf, "touch", str(marker))
    assert done.returncode == 1 and not marker.exists()
    assert done.stderr.startswith("cluster-cli-oci-run: cannot re")
    assert (str(gres_conf) if breakage == "no gres.conf" else "config.json") in done.stderr


def test_a_runtime_that_is_not_there_is_said(tmp_path: Path) -> None:
    bundle, gres_conf = _step(tmp_path)
    done = _run(bundle, gres_conf, str(tmp_path / "no-runc"))
    assert done.returncode == 1 and "cannot run" in done.stderr and "No such file" in done.stderr


def test_the_program_is_executable_python_of_the_standard_library() -> None:
    assert os.access(SCRIPT, os.X_OK) and SCRIPT.read_text().startswith("#!/usr/bin/python3\n")


# runc's stand-in for the end-of-step operations: each task directory's containers are the files in it
# (name: container id, text: its status); `kill` and `delete` write what they did to the file.
RUNTIME = """#!/bin/sh
root=${1#--root=}; shift
case $1 in
  list) ls "$root" | grep -v '^config.json$' ;;
  state) printf '{"id": "%s", "status": "%s"}\\n' "$2" "$(head -n1 "$root/$2")" ;;
  kill) if [ "$2" = -a ]; then [ -e "$root/.no-cgroup" ] && exit 1; echo "killed all $3 $4" >> "$root/$3"
        else echo "killed $2 $3" >> "$root/$2"; fi ;;
  delete) echo "deleted $3" >> "$root/$3" ;;
esac
"""


def _step_dir(tmp_path: Path, **tasks: str) -> tuple[Path, list[str]]:
    """A 24.11 step's directory (SlurmdSpoolDir/oci-jobJ-S/) whose task-T/ hold containers of ``tasks``' statuses."""
    step = tmp_path / "oci-job7-0"
    for task, status in tasks.items():
        (step / task).mkdir(parents=True)
        (step / task / f"n1.u.7.0.{task[-1]}").write_text(f"{status}\n")
    runtime = tmp_path / "runc"
    runtime.write_text(RUNTIME)
    runtime.chmod(0o755)
    return step, [str(runtime)]


def _end(operation: str, step: Path, runtime: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "--end", operation, "--step-dir", f"{step}/", "--", *runtime],
                          capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize(("tasks", "answer"), [
    ({"task-0": "stopped", "task-1": "running"}, '{"status": "running"}'),
    ({"task-0": "stopped"}, '{"status": "stopped"}'),
])
def test_at_a_steps_end_the_state_is_running_while_any_tasks_container_runs(
    tmp_path: Path, tasks: dict[str, str], answer: str
) -> None:
    """Slurm 24.11 names neither the task (%t is -1) nor runc's --root at the step's end: only %m."""
    step, runtime = _step_dir(tmp_path, **tasks)
    done = _end("state", step, runtime)
    assert (done.returncode, done.stdout.strip()) == (0, answer), done.stderr


def test_a_step_with_no_container_left_is_stopped(tmp_path: Path) -> None:
    """A step that ended by itself: an answer Slurm cannot read is an error in slurmd's log (seen on
    24.11.5 for every such step); "stopped" makes it run the delete, which finds nothing to do."""
    step, runtime = _step_dir(tmp_path)
    (step / "task-0").mkdir(parents=True)
    assert _end("state", step, runtime).stdout.strip() == '{"status": "stopped"}'
    done = _end("delete", step, runtime)
    assert (done.returncode, done.stdout) == (0, "")


@pytest.mark.parametrize("operation", ["kill", "delete"])
def test_kill_and_delete_reach_every_tasks_container(tmp_path: Path, operation: str) -> None:
    step, runtime = _step_dir(tmp_path, **{"task-0": "running", "task-1": "running"})
    done = _end(operation, step, runtime)
    assert done.returncode == 0, done.stderr
    for task in ("task-0", "task-1"):
        name = f"n1.u.7.0.{task[-1]}"
        done_line = f"killed all {name} KILL" if operation == "kill" else f"deleted {name}"
        assert (step / task / name).read_text().splitlines()[-1] == done_line


def test_kill_falls_back_to_the_first_process_where_runc_cannot_find_them_all(tmp_path: Path) -> None:
    """Rootless runc on cgroup v1 under 24.11 has no cgroup of its own: `kill -a` fails there (seen:
    "lstat : no such file or directory"), and SIGKILL to the container's first process remains."""
    step, runtime = _step_dir(tmp_path, **{"task-0": "running"})
    (step / "task-0" / ".no-cgroup").touch()
    done = _end("kill", step, runtime)
    assert done.returncode == 0, done.stderr
    assert (step / "task-0" / "n1.u.7.0.0").read_text().splitlines()[-1] == "killed n1.u.7.0.0 KILL"


def test_the_end_of_step_needs_the_steps_directory(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--end", "state", "--", "runc"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2 and "--end needs --step-dir" in done.stderr
