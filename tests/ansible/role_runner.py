"""Run task files of this repository's roles on localhost with ansible-playbook (argv list, never a shell).

The roles' fixed system paths are private variables (``__common_apt_dir``...); the tests point them
into a temporary root with extra variables, which win over role variables.
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

    def recap(self) -> dict[str, int]:
        match = re.search(rf"^{re.escape(HOST)}\s+:\s+(.*)$", self.stdout, re.MULTILINE)
        assert match, f"no recap for {HOST}:\n{self.stdout[-3000:]}"
        return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group(1))}

    def explain(self) -> str:
        return f"exit {self.returncode}\n{self.stdout[-6000:]}\n{self.stderr[-2000:]}"


def run_tasks(
    work: Path,
    role: str,
    tasks_from: list[str],
    extra_vars: dict[str, Any],
    options: tuple[str, ...] = (),
    timeout: int = 300,
) -> PlaybookRun:
    """Include ``role``'s task files ``tasks_from`` in order (with the role's defaults and vars) on
    a local-connection host."""
    executable = ansible_playbook()
    assert executable, "ansible-playbook not found"
    work.mkdir(parents=True, exist_ok=True)
    inventory = {
        "all": {"hosts": {HOST: {"ansible_connection": "local", "ansible_python_interpreter": TARGET_PYTHON}}}
    }
    (work / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    tasks = [
        {
            "name": f"{role} {name}",
            "ansible.builtin.include_role": {"name": role, "tasks_from": name, "public": True},
        }
        for name in tasks_from
    ]
    playbook = [{"name": f"{role} on {HOST}", "hosts": "all", "gather_facts": False, "tasks": tasks}]
    (work / "play.yml").write_text(yaml.safe_dump(playbook, sort_keys=False))
    (work / "extra.json").write_text(json.dumps(extra_vars))
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_ROLES_PATH=str(REPO / "roles"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_LOCAL_TEMP=str(work / "ansible-tmp"),
    )
    argv = [executable, "-i", str(work / "inventory.yml"), "-e", f"@{work / 'extra.json'}", *options]
    completed = subprocess.run(
        [*argv, str(work / "play.yml")],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
        check=False,
    )
    return PlaybookRun(completed.returncode, completed.stdout, completed.stderr)


def is_root() -> bool:
    return os.geteuid() == 0
