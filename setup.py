"""setuptools hook: the wheel carries what cluster-cli runs, so `pip install .` or pipx works.

The Ansible side (ansible.cfg, the collection's galaxy.yml, meta/, playbooks/, roles/, plugins/) and
the training jobs (training/) and the user guide the job templates carry (docs/using-the-cluster.md) live at the top of the source tree, where Ansible users and molecule use them as
they are. A wheel gets a copy of them inside the package, in cluster_cli/share/, and
cluster_cli.paths.project_root() finds it there (cluster-cli links it as the collection cluster_cli.slurm
for each playbook run, cluster_cli/ansible/runner.py). The modules cluster_cli/ shares with the
collection are links to plugins/plugin_utils/: the wheel gets the files. An editable install keeps using the checkout.
Test fixtures among them (TEST_ONLY) stay out of the wheel: only the checkout's tests use them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCE = Path(__file__).resolve().parent
SHIPPED = ("ansible.cfg", "galaxy.yml", "meta", "playbooks", "roles", "plugins", "training",
           "docs/using-the-cluster.md")
# The NVML emulator stands in for the NVIDIA driver on test bed hosts (molecule's gpu scenario,
# tests/nvml): a user's cluster never runs it, and a host it reached would schedule GPUs that do not exist.
TEST_ONLY = ("roles/nvml_emulator",)
_CLUTTER = shutil.ignore_patterns("__pycache__", "*.pyc")


def _left_out(directory: str, names: list[str]) -> set[str]:
    inside = Path(directory).relative_to(SOURCE)
    return set(_CLUTTER(directory, names)) | {name for name in names if (inside / name).as_posix() in TEST_ONLY}


class BuildPyWithProject(build_py):
    def run(self) -> None:
        super().run()
        share = Path(self.build_lib) / "cluster_cli" / "share"
        for name in SHIPPED:
            source = SOURCE / name
            if source.is_dir():
                shutil.copytree(source, share / name, dirs_exist_ok=True, ignore=_left_out)
            elif source.is_file():
                (share / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, share / name)


setup(cmdclass={"build_py": BuildPyWithProject})
