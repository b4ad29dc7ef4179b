"""Run this repository's roles on localhost with ansible-playbook (argv list, never a shell).

``run_tasks`` includes chosen task files of a role (the roles' fixed system paths are private
variables such as ``__common_apt_dir``, which the tests point into a temporary root with extra
variables); ``run_role`` applies a whole role to one or more local-connection hosts.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
TARGET_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").is_file() else sys.executable
HOST = "testhost"


def ansible_playbook() -> str | None:
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("ansible-playbook")


@dataclass
class PlaybookRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        """The output with white space collapsed, so messages can be matched whole."""
        return " ".join((self.stdout + "\n" + self.stderr).split())

    def recap(self, host: str = HOST) -> dict[str, int]:
        match = re.search(rf"^{re.escape(host)}\s+:\s+(.*)$", self.stdout, re.MULTILINE)
        assert match, f"no recap for {host}:\n{self.stdout[-3000:]}"
        return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group(1))}

    def explain(self) -> str:
        return f"exit {self.returncode}\n{self.stdout[-6000:]}\n{self.stderr[-2000:]}"


def role_vars_files(role: str) -> list[str]:
    """A role's defaults and vars, for a play that reads its variables without running it."""
    return [str(REPO / "roles" / role / "defaults" / "main.yml"), str(REPO / "roles" / role / "vars" / "main.yml")]


def run_play(
    work: Path,
    play: dict[str, Any],
    hosts: dict[str, dict[str, Any]],
    extra_vars: dict[str, Any],
    options: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout: int = 300,
    groups: dict[str, list[str]] | None = None,
) -> PlaybookRun:
    """Run one play (``hosts: all``, no facts) against local-connection ``hosts``, put in ``groups``
    (group name -> host names) where given."""
    executable = ansible_playbook()
    assert executable, "ansible-playbook not found"
    work.mkdir(parents=True, exist_ok=True)
    local = {"ansible_connection": "local", "ansible_python_interpreter": TARGET_PYTHON}
    inventory: dict[str, Any] = {"all": {"hosts": {name: {**local, **values} for name, values in hosts.items()}}}
    if groups:
        inventory["all"]["children"] = {
            group: {"hosts": {name: None for name in members}} for group, members in groups.items()
        }
    (work / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    (work / "play.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, **play}], sort_keys=False))
    (work / "extra.json").write_text(json.dumps(extra_vars))
    environment = dict(os.environ)
    environment.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(REPO / "roles"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_LOCAL_TEMP=str(work / "ansible-tmp"),
        **(env or {}),
    )
    argv = [executable, "-i", str(work / "inventory.yml"), "-e", f"@{work / 'extra.json'}", *options]
    completed = subprocess.run(
        [*argv, str(work / "play.yml")],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=REPO,
        check=False,
    )
    return PlaybookRun(completed.returncode, completed.stdout, completed.stderr)


def run_tasks(
    work: Path,
    role: str,
    tasks_from: list[str],
    extra_vars: dict[str, Any],
    options: tuple[str, ...] = (),
    timeout: int = 300,
) -> PlaybookRun:
    """Include ``role``'s task files ``tasks_from`` in order (with the role's defaults and vars) on
    the host ``HOST``."""
    tasks = [
        {"name": f"{role} {name}", "ansible.builtin.include_role": {"name": role, "tasks_from": name, "public": True}}
        for name in tasks_from
    ]
    play = {"name": f"{role} on {HOST}", "tasks": tasks}
    return run_play(work, play, {HOST: {}}, extra_vars, options, timeout=timeout)


def run_role(
    work: Path,
    role: str,
    host_vars: dict[str, Any] | None = None,
    extra_vars: dict[str, Any] | None = None,
    hosts: tuple[str, ...] = ("gpuhost",),
    path_prefix: Path | None = None,
    timeout: int = 600,
) -> PlaybookRun:
    """Apply ``role`` to ``hosts`` (all local connections to this machine); results as JSON."""
    env = {"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}{os.pathsep}{os.environ.get('PATH', '')}"
    play = {"name": f"role {role}", "roles": [{"role": role}]}
    inventory = {host: dict(host_vars or {}) for host in hosts}
    return run_play(work, play, inventory, extra_vars or {}, env=env, timeout=timeout)


# roles/slurmd's files of the host (vars/main.yml), each written or removed by its configure phase
SLURMD_HOST_FILES = {
    "__slurmd_health_program": "cluster-cli-health",
    "__slurmd_health_config": "cluster-cli-health.json",
    "__slurmd_oci_run_program": "cluster-cli-oci-run",
    "__slurmd_pam_access_file": "access-slurm-adopt.conf",
    "__slurmd_pam_sshd_file": "pam.d-sshd",
    "__slurmd_pam_session_file": "pam.d-common-session",
    "__slurmd_openmpi_params_file": "openmpi-mca-params.conf",
    "__slurmd_boot_gpus_path": "slurmd-fake-gpus.conf",
}


def slurmd_host_files(directory: Path) -> dict[str, str]:
    """roles/slurmd's host files pointed into ``directory``: a role test must not write or remove the
    machine's own (a local cluster deployed here keeps its health check, its Open MPI lines, its
    container start program and its PAM stack)."""
    return {name: str(directory / file) for name, file in SLURMD_HOST_FILES.items()}


def is_root() -> bool:
    return os.geteuid() == 0


def nvidia_smi_works() -> bool:
    """A real NVIDIA driver on this machine (then 'no driver' cases cannot be shown here)."""
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, check=False).returncode == 0


def write_executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


SYSTEMCTL_STUB = """#!/bin/sh
# systemd stands behind this stub (no systemd as PID 1 here): every call logged, each unit's
# enabled and active state kept as files in STATE.
state=STATE
echo "$*" >> "$state/log"
verb=$1; shift
case "$verb" in
  show) [ -e "$state/active.$1" ] && active=active || active=inactive
        [ -e "$state/enabled.$1" ] && enabled=enabled || enabled=disabled
        printf 'Id=%s\\nLoadState=loaded\\nActiveState=%s\\nSubState=x\\nUnitFileState=%s\\n' "$1" "$active" "$enabled" ;;
  is-enabled) [ -e "$state/enabled.$1" ] && { echo enabled; exit 0; }; echo disabled; exit 1 ;;
  is-active) [ -e "$state/active.$1" ] && { echo active; exit 0; }; echo inactive; exit 3 ;;
  enable) touch "$state/enabled.$1" ;;
  disable) rm -f "$state/enabled.$1" ;;
  start) touch "$state/active.$1" ;;
  stop) rm -f "$state/active.$1" ;;
esac
exit 0
"""


def systemctl_stub(directory: Path, state: Path) -> Path:
    """``directory``/systemctl: SYSTEMCTL_STUB keeping the units' states in ``state`` (made here)."""
    state.mkdir(parents=True, exist_ok=True)
    return write_executable(directory / "systemctl", SYSTEMCTL_STUB.replace("STATE", str(state)))
