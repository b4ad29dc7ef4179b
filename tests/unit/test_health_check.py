"""roles/slurmd/files/cluster-cli-health, Slurm's HealthCheckProgram, run as slurmd runs it.

Each test runs the script in a subprocess against a temporary tree: device files are /dev/null
(a character device), a missing path or a plain file; slurmd, munge, unmunge, sinfo and scontrol
are fakes on PATH. The fake sinfo reports the state kept in a file, the fake scontrol records its
arguments and updates that state as slurmctld would, so a drain is seen by the next run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.machinery import SourceFileLoader
from pathlib import Path
from types import ModuleType

import pytest

from cluster_cli.render.health_conf import HEALTH_CONFIG_PATH, HEALTH_REASON_PREFIX
from unit_helpers import REPO

SCRIPT = REPO / "roles" / "slurmd" / "files" / "cluster-cli-health"
PREFIX = HEALTH_REASON_PREFIX

FAKES = {
    "slurmd": """
import sys
print(open(sys.argv[0] + '.out').read())
""",
    "munge": """
import os, sys
if os.path.exists(sys.argv[0] + '.broken'):
    sys.exit('munge: Error: Failed to access "/run/munge/munge.socket.2"')
print('MUNGE:cred')
""",
    "unmunge": """
import sys
sys.exit(0 if sys.stdin.read().strip() == 'MUNGE:cred' else 'unmunge: Error: Invalid credential')
""",
    "sinfo": """
import os, sys
print(open(os.path.join(os.path.dirname(sys.argv[0]), 'state')).read())
""",
    "scontrol": """
import json, os, sys
here = os.path.dirname(sys.argv[0])
with open(os.path.join(here, 'calls'), 'a') as calls:
    calls.write(json.dumps(sys.argv[1:]) + '\\n')
words = dict(arg.split('=', 1) for arg in sys.argv[3:])
state = 'drained|' + words['Reason'] if words['State'] == 'DRAIN' else 'idle|none'
open(os.path.join(here, 'state'), 'w').write(state)
""",
}


class Host:
    """A compute host in a temporary directory: one node, its devices, its fake commands."""

    def __init__(self, root: Path):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        for name, body in FAKES.items():
            path = self.bin / name
            path.write_text(f"#!{sys.executable}{body}", encoding="utf-8")
            path.chmod(0o755)
        self.hardware("CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=8000")
        self.set_state("idle", "none")
        (root / "spool").mkdir()
        self.config = {
            "reason_prefix": PREFIX,
            "min_free_mb": 1,
            "mounts": [],
            "nodes": {
                "gpu1": {
                    "cpus": 4, "real_memory_mb": 7000, "gpus": 2,
                    "gpu_devices": ["/dev/null", str(root / "nvidia1")],
                    "slurm_conf": str(root / "slurm.conf"),
                    "free_space_dirs": [str(root / "spool")],
                },
            },
        }
        self.gpu("present")

    def hardware(self, line: str) -> None:
        (self.bin / "slurmd.out").write_text(f"NodeName=gpu1 {line}\nUpTime=0-01:00:00\n", encoding="utf-8")

    def gpu(self, kind: str) -> None:
        """nvidia1 present (a character device: a symlink to /dev/null), missing, or a plain file."""
        path = self.root / "nvidia1"
        if path.is_symlink() or path.exists():
            path.unlink()
        if kind == "present":
            path.symlink_to("/dev/null")
        elif kind == "file":
            path.write_text("", encoding="utf-8")

    def set_state(self, state: str, reason: str) -> None:
        (self.bin / "state").write_text(f"{state}|{reason}\n", encoding="utf-8")

    def state(self) -> str:
        return (self.bin / "state").read_text(encoding="utf-8").strip()

    def calls(self) -> list[list[str]]:
        path = self.bin / "calls"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        config = self.root / "health.json"
        config.write_text(json.dumps(self.config), encoding="utf-8")
        # As slurmd runs it: SLURMD_NODENAME and (here, for the fakes) PATH, nothing else.
        env = {"SLURMD_NODENAME": "gpu1", "PATH": f"{self.bin}:/usr/bin:/bin"}
        return subprocess.run([sys.executable, str(SCRIPT), "--config", str(config), *arguments],
                              capture_output=True, text=True, env=env, check=False, timeout=60)


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host(tmp_path)


def drain_call(reason: str) -> list[str]:
    return ["update", "NodeName=gpu1", "State=DRAIN", f"Reason={reason}"]


RESUME_CALL = ["update", "NodeName=gpu1", "State=RESUME"]


def test_a_healthy_node_that_is_not_drained_is_left_alone(host: Host) -> None:
    done = host.run()
    assert (done.returncode, done.stdout.strip()) == (0, "gpu1: pass")
    assert host.calls() == []


def test_a_missing_gpu_device_drains_the_node_with_the_evidence(host: Host) -> None:
    host.gpu("missing")
    done = host.run()
    reason = f"{PREFIX} gpu {host.root / 'nvidia1'} missing"
    assert done.returncode == 1
    assert host.calls() == [drain_call(reason)]
    assert host.state() == f"drained|{reason}"


def test_a_device_that_is_no_character_device_fails(host: Host) -> None:
    host.gpu("file")
    host.run()
    assert host.calls() == [drain_call(f"{PREFIX} gpu {host.root / 'nvidia1'} not a character device")]


def test_the_node_is_resumed_once_it_passes_again(host: Host) -> None:
    host.gpu("missing")
    host.run()
    host.run()  # still failing, same evidence: no second drain
    assert len(host.calls()) == 1
    host.gpu("present")
    done = host.run()
    assert done.returncode == 0
    assert host.calls()[1:] == [RESUME_CALL]
    assert host.state() == "idle|none"


def test_new_evidence_replaces_the_reason_of_its_own_drain(host: Host) -> None:
    host.set_state("drained", f"{PREFIX} munge: munge -n failed: gone")
    host.gpu("missing")
    host.run()
    assert host.calls() == [drain_call(f"{PREFIX} gpu {host.root / 'nvidia1'} missing")]


@pytest.mark.parametrize("reason", [
    "replacing the PSU",                    # an administrator's drain
    "cluster-cli: retiring",                # cluster-cli nodes drain / deploy's removal: an operator's
    "Low RealMemory",                       # slurmctld's own
    f"checked by hand, not {PREFIX}",       # the prefix somewhere else is not the prefix
])
@pytest.mark.parametrize("gpu", ["present", "missing"])
def test_a_drain_with_another_reason_is_never_touched(host: Host, reason: str, gpu: str) -> None:
    host.set_state("drained", reason)
    host.gpu(gpu)
    done = host.run()
    assert host.calls() == []
    assert host.state() == f"drained|{reason}"
    assert "left alone" in done.stdout


def test_hardware_below_the_configuration_fails(host: Host) -> None:
    host.hardware("CPUs=2 RealMemory=6000")
    host.run()
    assert host.calls() == [drain_call(
        f"{PREFIX} hardware: CPUs 2 CPUs < 4 CPUs configured; hardware: RealMemory 6000 MB < 7000 MB configured")]


def test_a_broken_munge_fails(host: Host) -> None:
    (host.bin / "munge.broken").write_text("", encoding="utf-8")
    done = host.run("--no-act")
    assert "munge: munge -n failed: munge: Error: Failed to access" in done.stdout
    assert host.calls() == []


def test_low_free_space_and_a_missing_mount_fail(host: Host) -> None:
    host.config["min_free_mb"] = 1 << 40
    host.config["mounts"] = [str(host.root / "spool")]
    done = host.run("--no-act", "--json")
    result = json.loads(done.stdout)["nodes"][0]
    assert [line.split(":")[0] for line in result["evidence"]] == [f"disk {host.root / 'spool'}", f"mount {host.root / 'spool'} not mounted"]
    assert result["action"] == "would drain"
    assert host.calls() == []


def _fake_stat(host: Host, body: str) -> None:
    path = host.bin / "stat"
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)


def test_a_mount_that_answers_passes_and_one_that_hangs_is_reported_in_time(host: Host) -> None:
    """/proc is a mount point everywhere. A stat that never answers (a hard NFS mount whose server is
    gone) is emulated by a stand-in whose own child keeps its stderr open: the checker must neither
    wait for it nor read from it, and still gives its verdict."""
    host.config["nodes"]["gpu1"]["mounts"] = ["/proc"]
    assert json.loads(host.run("--no-act", "--json").stdout)["nodes"][0]["passed"]
    _fake_stat(host, "sleep 120 &\nwait")
    started = time.monotonic()
    result = json.loads(host.run("--no-act", "--json").stdout)["nodes"][0]
    seconds = time.monotonic() - started
    [line] = result["evidence"]
    assert line.startswith("mount /proc does not answer: stat stuck over 5 s (pid "), line
    assert result["action"] == "would drain" and seconds < 30, seconds


def test_a_stale_mount_is_evidence_with_the_error(host: Host) -> None:
    host.config["mounts"] = ["/proc"]
    _fake_stat(host, "echo \"stat: cannot statx '$3': Stale file handle\" >&2\nexit 1")
    result = json.loads(host.run("--no-act", "--json").stdout)["nodes"][0]
    assert result["evidence"] == ["mount /proc: stat: cannot statx '/proc': Stale file handle"]


def test_mount_points_are_read_from_the_kernels_table_with_escapes(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text("22 1 0:21 / /proc rw - proc proc rw\n"
                     "40 22 0:35 / /shared\\040work rw - fuse.sshfs ctl:/x rw\n", encoding="utf-8")
    assert load_script().mount_points(str(table)) == {"/proc", "/shared work"}


def test_a_directory_not_made_yet_is_checked_on_the_file_system_it_will_be_on(host: Host) -> None:
    # slurmd's first start (and check) comes before the training role makes its work directory
    host.config["nodes"]["gpu1"]["free_space_dirs"].append(str(host.root / "work" / "not-yet"))
    assert host.run().stdout.strip() == "gpu1: pass"
    host.config["min_free_mb"] = 1 << 40
    assert f"disk {host.root / 'work' / 'not-yet'}: " in host.run("--no-act").stdout


def test_an_unknown_node_is_a_usage_error(host: Host) -> None:
    done = host.run("--node", "gpu9")
    assert done.returncode == 2 and "no node 'gpu9'" in done.stderr


def test_the_reason_is_kept_short(host: Host) -> None:
    host.config["mounts"] = [f"/not/mounted/{index}" for index in range(40)]
    host.run()
    reason = host.calls()[0][3].removeprefix("Reason=")
    assert reason.startswith(f"{PREFIX} mount /not/mounted/0 not mounted") and len(reason) <= 200


def load_script() -> ModuleType:
    loader = SourceFileLoader("cluster_cli_health", str(SCRIPT))
    module = ModuleType(loader.name)
    loader.exec_module(module)
    return module


def test_the_script_reads_the_config_where_the_role_installs_it() -> None:
    assert load_script().DEFAULT_CONFIG == HEALTH_CONFIG_PATH


@pytest.mark.parametrize(("passed", "state", "reason", "action"), [
    (True, "idle", "", ""),
    (True, "drained", f"{PREFIX} gpu x missing", "resume"),
    (True, "draining", "admin: disk swap", ""),
    (False, "idle", "", "drain"),
    (False, "mixed", "", "drain"),
    (False, "drained", f"{PREFIX} gpu x missing", ""),
    (False, "draining", f"{PREFIX} gpu x missing", ""),
    (False, "drained", f"{PREFIX} munge broken", "drain"),
    (False, "drained", "admin: disk swap", ""),
    (False, "down", "Not responding", ""),
])
def test_decide(passed: bool, state: str, reason: str, action: str) -> None:
    wanted = f"{PREFIX} gpu x missing"
    assert load_script().decide(passed, state, reason, wanted, PREFIX) == action


def test_the_script_is_executable_and_standard_library_only() -> None:
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text(encoding="utf-8").startswith("#!/usr/bin/python3\n")
