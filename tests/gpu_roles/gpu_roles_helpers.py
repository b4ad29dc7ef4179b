"""Run one role of this repository on localhost with ansible-playbook (argv list, never a shell)."""

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


def ansible_playbook() -> str | None:
    beside = Path(sys.executable).parent / "ansible-playbook"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("ansible-playbook")


@dataclass
class RoleRun:
    returncode: int
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        """The output with whitespace collapsed, so messages can be matched whole."""
        return " ".join((self.stdout + "\n" + self.stderr).split())

    def recap(self, host: str) -> dict[str, int]:
        match = re.search(rf"^{re.escape(host)}\s+:\s+(.*)$", self.stdout, re.MULTILINE)
        assert match, f"no recap for {host}:\n{self.stdout[-3000:]}"
        return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group(1))}

    def explain(self) -> str:
        return f"exit {self.returncode}\n{self.stdout[-6000:]}\n{self.stderr[-2000:]}"


def run_role(
    work: Path,
    role: str,
    host_vars: dict[str, Any] | None = None,
    extra_vars: dict[str, Any] | None = None,
    hosts: tuple[str, ...] = ("gpuhost",),
    path_prefix: Path | None = None,
    timeout: int = 600,
) -> RoleRun:
    """Apply `role` to `hosts` (all local connections to this machine)."""
    executable = ansible_playbook()
    assert executable, "ansible-playbook not found"
    work.mkdir(parents=True, exist_ok=True)
    inventory = {
        "all": {
            "hosts": {
                host: {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": TARGET_PYTHON,
                    **(host_vars or {}),
                }
                for host in hosts
            }
        }
    }
    (work / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    playbook = [{"name": f"role {role}", "hosts": "all", "gather_facts": False, "roles": [{"role": role}]}]
    (work / "play.yml").write_text(yaml.safe_dump(playbook, sort_keys=False))
    (work / "extra.json").write_text(json.dumps(extra_vars or {}))
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(REPO / "roles"),
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_LOCAL_TEMP=str(work / "ansible-tmp"),
    )
    if path_prefix is not None:
        env["PATH"] = f"{path_prefix}{os.pathsep}{env.get('PATH', '')}"
    argv = [
        executable,
        "-i",
        str(work / "inventory.yml"),
        "-e",
        f"@{work / 'extra.json'}",
        str(work / "play.yml"),
    ]
    completed = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO, check=False
    )
    return RoleRun(completed.returncode, completed.stdout, completed.stderr)


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
