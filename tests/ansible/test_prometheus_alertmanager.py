"""roles/prometheus installs Alertmanager's configuration with the inventory's receivers (it holds
the webhook URLs): the prometheus group's only (0640), checked by amtool first, and never shown,
even with --diff. Run for real with ansible-playbook on localhost; amtool is Alertmanager's own
(tests/unit/test_alert_delivery.py unpacks Debian's package)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from role_runner import ansible_playbook, run_tasks

# Debian's Alertmanager, unpacked once by the unit test that runs it (its amtool checks the file here).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_alert_delivery import ALERTMANAGER

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(ALERTMANAGER is None, reason="needs Debian's prometheus-alertmanager (apt-get download as root)"),
]
SECRET = "https://hooks.example.org/T0/B0/s3cret-token"
CONFIG = ('{"route": {"receiver": "cluster-cli"}, "receivers": [{"name": "cluster-cli", '
          f'"webhook_configs": [{{"url": "{SECRET}"}}]}}]}}\n')


def _install(tmp_path: Path, text: str):
    source = tmp_path / "alertmanager.yml"
    source.write_text(text)
    conf_dir = tmp_path / "etc-prometheus"
    conf_dir.mkdir(exist_ok=True)
    assert ALERTMANAGER is not None
    extra = {"prometheus_alertmanager_config_src": str(source), "__prometheus_conf_dir": str(conf_dir),
             "__prometheus_user": "root", "__prometheus_amtool": str(ALERTMANAGER.parent / "amtool"),
             # as after a fresh install: the restart handler stays out of this test
             "__prometheus_install": {"absent": ["prometheus-alertmanager"]}}
    return conf_dir / "alertmanager.yml", run_tasks(tmp_path / "work", "prometheus", ["alertmanager_config"], extra,
                                                    options=("--diff",))


def test_the_configuration_is_the_groups_only_and_never_shown(tmp_path: Path) -> None:
    installed, run = _install(tmp_path, CONFIG)
    assert run.returncode == 0, run.explain()
    assert installed.read_text() == CONFIG
    assert oct(installed.stat().st_mode & 0o777) == "0o640"
    assert "s3cret-token" not in run.stdout + run.stderr


def test_a_configuration_amtool_refuses_leaves_the_one_in_place(tmp_path: Path) -> None:
    installed, _ = _install(tmp_path, CONFIG)
    _, run = _install(tmp_path, CONFIG.replace('"receiver": "cluster-cli"', '"receiver": "nobody"'))
    assert run.returncode != 0
    assert installed.read_text() == CONFIG
    assert "s3cret-token" not in run.stdout + run.stderr
