"""cluster_cli/ansible/callback_plugins/cluster_cli_warmup.py, in a real ansible-playbook run: the
Jinja filters and tests are loaded in the main process before the first play, so a worker starts
with them (issue 17: otherwise every worker, one per task and host, loads them again).

A lookup of this test's own (lookups are not Jinja filters or tests, so calling it loads none)
reports from inside the worker whether the filter loader's cache is already filled.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from role_runner import REPO, ansible_playbook, run_play

from cluster_cli.ansible import runner

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

PROBE = '''
from ansible.plugins.loader import filter_loader
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        collection = any(path.endswith("/plugins/filter/cluster_filters.py") for path in filter_loader._module_cache)
        return ["filters-loaded" if filter_loader._cached_non_collection_wrappers else "filters-not-loaded",
                "collection-filters-loaded" if collection else "collection-filters-not-loaded"]
'''
PLAY = {"tasks": [{"ansible.builtin.debug": {"msg": "{{ lookup('warm_probe') }}"}}]}


def _run(tmp_path: Path, callbacks: str) -> str:
    (tmp_path / "lookups").mkdir(parents=True)
    (tmp_path / "lookups" / "warm_probe.py").write_text(PROBE)
    env = {
        "ANSIBLE_LOOKUP_PLUGINS": str(tmp_path / "lookups"),
        "ANSIBLE_CALLBACK_PLUGINS": str(runner.PLUGIN_DIR),
        "ANSIBLE_CALLBACKS_ENABLED": callbacks,
    }
    run = run_play(tmp_path, PLAY, {"testhost": {}}, {}, env=env)
    assert run.returncode == 0, run.explain()
    return run.stdout


def test_a_worker_starts_with_the_filters_the_warmup_loaded(tmp_path: Path) -> None:
    stdout = _run(tmp_path, "cluster_cli_events,cluster_cli_warmup")
    assert "filters-loaded" in stdout and "filters-not-loaded" not in stdout
    # the roles' own filters, cluster_cli.slurm's (found through ansible.cfg's collections_path)
    assert "collection-filters-loaded" in stdout and "collection-filters-not-loaded" not in stdout


def test_without_the_warmup_a_worker_starts_without_them(tmp_path: Path) -> None:
    # The events callback alone (no event stream: it writes nothing): the probe tells the difference.
    stdout = _run(tmp_path, "cluster_cli_events")
    assert "filters-not-loaded" in stdout and "collection-filters-not-loaded" in stdout


def test_cluster_cli_enables_the_warmup_beside_its_events() -> None:
    source = (REPO / "cluster_cli" / "ansible" / "runner.py").read_text()
    assert '"ANSIBLE_CALLBACKS_ENABLED": "cluster_cli_events,cluster_cli_warmup"' in source
