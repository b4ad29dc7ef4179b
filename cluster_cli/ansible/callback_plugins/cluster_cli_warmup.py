"""Ansible callback plugin: load the Jinja filters and tests once, in ansible-playbook's main process.

Every task runs on every host in a worker process forked from the main process. The first filter
or test a worker's templates name makes it load them (Ansible's, and the file of the collection
filter it names: cluster_cli.slurm's plugins/filter/) into its plugin loader's cache, about 5 ms of
CPU, and that cache ends with the worker: a deploy paid it once per task and host. Loaded here,
before the first play, the cache is in the main process, and every worker is forked with it.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import PluginLoader, filter_loader, test_loader

DOCUMENTATION = """
name: cluster_cli_warmup
type: aggregate
short_description: Jinja filter and test plugins loaded before the first play, for every worker
description:
  - Loads every Jinja filter and test plugin (Ansible's, those of the configured paths, and every file
    of the cluster_cli.slurm collection's) in the main process when the playbook starts, so that the
    worker processes Ansible forks for each task and host inherit them instead of loading them again.
"""

# The collections whose filters and tests the roles name: the project's own (galaxy.yml).
COLLECTIONS = ("cluster_cli.slurm",)


def load_collection_files(loader: PluginLoader, collection: str) -> int:
    """Load every file of ``collection``'s plugins of ``loader``'s type into the loader's module
    cache, as the loader does when a template names one of them (its Jinja2Loader reads each file
    through the base class); how many files (none where the collection has no such plugins)."""
    try:
        package = import_module(f"ansible_collections.{collection}.plugins.{loader.type}")
    except ImportError:
        return 0
    names = [name for _, name, is_package in pkgutil.iter_modules(package.__path__) if not is_package]
    for name in names:
        PluginLoader.get_with_context(loader, f"{collection}.{name}")
    return len(names)


def load_jinja_plugins() -> int:
    """Load every filter and test plugin into their loaders' caches; how many were loaded (a
    collection's file counts once)."""
    loaded = sum(1 for loader in (filter_loader, test_loader) for _ in loader.all())
    return loaded + sum(load_collection_files(loader, collection)
                        for loader in (filter_loader, test_loader) for collection in COLLECTIONS)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cluster_cli_warmup"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        load_jinja_plugins()
