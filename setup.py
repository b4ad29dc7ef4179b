"""setuptools hook: the wheel carries what cluster-cli runs, so `pip install .` or pipx works.

The Ansible side (ansible.cfg, playbooks/, roles/, filter_plugins/, library/, action_plugins/, lookup_plugins/) and
the training jobs (training/) live at the top of the source tree, where Ansible users and molecule use them as
they are. A wheel gets a copy of them inside the package, in cluster_cli/share/, and
cluster_cli.paths.project_root() finds it there. An editable install keeps using the checkout.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SOURCE = Path(__file__).resolve().parent
SHIPPED = ("ansible.cfg", "playbooks", "roles", "filter_plugins", "library", "action_plugins", "lookup_plugins", "training")


class BuildPyWithProject(build_py):
    def run(self) -> None:
        super().run()
        share = Path(self.build_lib) / "cluster_cli" / "share"
        for name in SHIPPED:
            source = SOURCE / name
            if source.is_dir():
                shutil.copytree(source, share / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            elif source.is_file():
                share.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, share / name)


setup(cmdclass={"build_py": BuildPyWithProject})
