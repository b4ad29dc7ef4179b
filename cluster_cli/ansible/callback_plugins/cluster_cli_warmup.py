"""Ansible callback plugin: load the Jinja filters and tests once, in ansible-playbook's main process.

Every task runs on every host in a worker process forked from the main process. The first filter
or test a worker's templates name makes it load all of them (the roles' plugins/filter/ and
Ansible's) into its plugin loader's cache, about 5 ms of CPU, and that cache ends with the worker:
a deploy paid it once per task and host. Loaded here, before the first play, the cache is in the
main process, and every worker is forked with it.
"""

from __future__ import annotations

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import filter_loader, test_loader

DOCUMENTATION = """
name: cluster_cli_warmup
type: aggregate
short_description: Jinja filter and test plugins loaded before the first play, for every worker
description:
  - Loads every Jinja filter and test plugin in the main process when the playbook starts, so that
    the worker processes Ansible forks for each task and host inherit them instead of loading them again.
"""


def load_jinja_plugins() -> int:
    """Load every filter and test plugin into their loaders' caches; how many were loaded."""
    return sum(1 for loader in (filter_loader, test_loader) for _ in loader.all())


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cluster_cli_warmup"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        load_jinja_plugins()
