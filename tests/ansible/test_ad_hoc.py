"""cluster_cli.ansible.runner.run_ad_hoc, run for real: one command on one inventory host.

cluster-cli status and health parse what it returns (sinfo rows, sacctmgr lines), so the output must
be the command's own text whatever the caller's environment says about colours.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from role_runner import TARGET_PYTHON, ansible_playbook

from cluster_cli.ansible.runner import run_ad_hoc

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible is not installed")


def test_the_output_is_the_commands_text_even_when_colour_is_forced(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANSIBLE_FORCE_COLOR", "1")  # molecule and many CI systems set it
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"ctl": {
        "ansible_connection": "local", "ansible_python_interpreter": TARGET_PYTHON}}}}))
    code, output = run_ad_hoc(inventory, "ctl", ["printf", "c1|idle|none|gpu:fake:1\\n"])
    assert code == 0, output
    assert output == "c1|idle|none|gpu:fake:1"
