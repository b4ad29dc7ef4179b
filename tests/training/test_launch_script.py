"""training/launch.sh's helpers, run in bash with srun_torchrun replaced by a stand-in."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

LAUNCH = Path(__file__).resolve().parents[2] / "training" / "launch.sh"


def bash(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "1234", "SLURM_SUBMIT_DIR": "/tmp"}
    base["TRAIN_PYTHON"] = sys.executable
    return subprocess.run(
        ["bash", "-c", f'set -euo pipefail; source "{LAUNCH}"\n{script}'],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=30,
        check=False,
    )


# srun_torchrun SCRIPT --out RESULT ...: the stand-in writes the result or not, then exits as told.
STAND_IN = """
srun_torchrun() {
    [ "$WRITE" = 1 ] && echo '{"check": "x"}' > "$3"
    return "$RC"
}
"""


def test_a_launch_that_fails_after_its_complete_result_warns_and_lets_the_job_go_on(tmp_path):
    result = tmp_path / "r.json"
    done = bash(f'{STAND_IN}\nlaunch_for_result "{result}" ddp.py\necho next launch', WRITE="1", RC="134")
    assert done.returncode == 0, done.stderr
    assert f"teardown-warning: ddp.py exited 134 after writing its complete result {result}" in done.stdout
    assert "next launch" in done.stdout


def test_a_launch_that_fails_without_a_result_fails_the_job(tmp_path):
    done = bash(f'{STAND_IN}\nlaunch_for_result "{tmp_path}/r.json" ddp.py\necho next', WRITE="0", RC="1")
    assert done.returncode == 1 and "next" not in done.stdout and "teardown-warning" not in done.stdout


def test_a_stale_result_from_before_the_launch_does_not_count(tmp_path):
    result = tmp_path / "r.json"
    result.write_text('{"check": "old"}')
    done = bash(f'{STAND_IN}\nlaunch_for_result "{result}" ddp.py', WRITE="0", RC="1")
    assert done.returncode == 1 and not result.exists()


def test_rendezvous_port_follows_rdzv_port_then_counts_launches():
    done = bash("rendezvous_port node1; _launch_count=1; rendezvous_port node1", RDZV_PORT="31000")
    assert done.stdout.split() == ["31000", "31001"]


def test_on_the_head_node_a_taken_port_is_passed_over_for_a_free_one():
    expected = 29500 + 1234 % 1500 * 2
    with socket.socket() as taken:
        taken.bind(("", expected))
        taken.listen()
        port = int(bash("rendezvous_port node1", SLURMD_NODENAME="node1").stdout)
    assert port == expected + 2
    assert int(bash("rendezvous_port node1", SLURMD_NODENAME="node1").stdout) == expected  # free again


def test_ports_stay_below_the_ephemeral_range_and_apart():
    low, _high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    seen: list[int] = []
    for job in ("1498", "1499", "1500"):
        done = bash("rendezvous_port node1; _launch_count=1; rendezvous_port node1", SLURM_JOB_ID=job)
        seen.extend(int(port) for port in done.stdout.split())
    assert all(29500 <= port < low for port in seen), seen
    assert len(set(seen)) == len(seen), seen  # two launches of neighbouring jobs never share a port
