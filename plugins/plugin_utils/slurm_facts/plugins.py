"""Which plugins a Slurm series ships, and which configuration keys name one (data/slurm-<series>.json
"plugins": the plugin files of the Debian packages cluster-cli installs, listed by devtools/slurm_docs.py).

A key's value names plugins as ``TYPE/NAME`` (``TopologyPlugin=topology/tree``), some keys take a
comma-separated list of them (``TaskPlugin=task/affinity,task/cgroup``), a few take the bare
``NAME`` too (``MpiDefault=pmix``, ``JobSubmitPlugins=lua``: Slurm puts the type in front of a list's
items that lack it, and of MpiDefault's value). slurmctld and slurmd load
``TYPE_NAME.so`` from the plugin directory and do not start when it is not there.
"""

from __future__ import annotations

from dataclasses import dataclass

from .facts import series, series_data


@dataclass(frozen=True)
class PluginKey:
    """A key whose value names plugins: their type, and whether it takes a list or bare names."""

    plugin_type: str
    is_list: bool = False
    bare_names: bool = False


# slurm.conf(5) and cgroup.conf(5): the keys whose values are plugins, by the type of plugin they load.
PLUGIN_KEYS: dict[str, dict[str, PluginKey]] = {
    "slurm.conf": {
        "AccountingStorageType": PluginKey("accounting_storage"),
        "AcctGatherEnergyType": PluginKey("acct_gather_energy"),
        "AcctGatherFilesystemType": PluginKey("acct_gather_filesystem"),
        "AcctGatherInterconnectType": PluginKey("acct_gather_interconnect"),
        "AcctGatherProfileType": PluginKey("acct_gather_profile"),
        "AuthAltTypes": PluginKey("auth", is_list=True),
        "AuthType": PluginKey("auth"),
        "BurstBufferType": PluginKey("burst_buffer"),
        "CliFilterPlugins": PluginKey("cli_filter", is_list=True, bare_names=True),
        "CoreSpecPlugin": PluginKey("core_spec"),
        "CredType": PluginKey("cred"),
        "ExtSensorsType": PluginKey("ext_sensors"),
        "HashPlugin": PluginKey("hash"),
        "JobAcctGatherType": PluginKey("jobacct_gather"),
        "JobCompType": PluginKey("jobcomp"),
        "JobContainerType": PluginKey("job_container"),
        "JobSubmitPlugins": PluginKey("job_submit", is_list=True, bare_names=True),
        "LaunchType": PluginKey("launch"),
        "MCSPlugin": PluginKey("mcs"),
        "MpiDefault": PluginKey("mpi", bare_names=True),
        "NodeFeaturesPlugins": PluginKey("node_features", is_list=True, bare_names=True),
        "PowerPlugin": PluginKey("power"),
        "PreemptType": PluginKey("preempt"),
        "PrEpPlugins": PluginKey("prep", is_list=True, bare_names=True),
        "PriorityType": PluginKey("priority"),
        "ProctrackType": PluginKey("proctrack"),
        "RoutePlugin": PluginKey("route"),
        "SchedulerType": PluginKey("sched"),
        "SelectType": PluginKey("select"),
        "SiteFactorPlugin": PluginKey("site_factor"),
        "SwitchType": PluginKey("switch"),
        "TaskPlugin": PluginKey("task", is_list=True, bare_names=True),
        "TLSType": PluginKey("tls"),
        "TopologyPlugin": PluginKey("topology"),
    },
    "cgroup.conf": {"CgroupPlugin": PluginKey("cgroup")},
}
# Every plugin type a key above loads: the plugin files devtools/slurm_docs.py records.
PLUGIN_TYPES = frozenset(key.plugin_type for keys in PLUGIN_KEYS.values() for key in keys.values())
# Values that load no file: "none" of any type (a file of its own up to 23.02, built into Slurm
# since 23.11; the trixie scenario runs 24.11 with JobCompType=jobcomp/none and MpiDefault=none)
# and cgroup.conf(5)'s "autodetect" (slurmd picks cgroup/v1 or cgroup/v2).
NO_FILE_NAMES: dict[str, frozenset[str]] = {"cgroup": frozenset({"autodetect"})}


def shipped_plugins(version: str) -> dict[str, frozenset[str]]:
    """The plugin names of each type that ``version``'s series ships ({"topology": {"tree", ...}})."""
    types = series_data(series(version)).get("plugins", {}).get("types", {})
    return {plugin_type: frozenset(names) for plugin_type, names in types.items()}


def plugin_key(file_name: str, key: str) -> PluginKey | None:
    """The plugin key ``key`` is to Slurm (which reads keys without case); None for another key."""
    keys = PLUGIN_KEYS.get(file_name, {})
    return next((keys[name] for name in keys if name.lower() == key.lower()), None)


def plugin_problems(version: str, file_name: str, key: str, value: object) -> list[str]:
    """Why ``key=value`` of ``file_name`` would not load in ``version``'s series: a plugin of the wrong
    type, or one the series does not ship; none for a key that names no plugin, or a null value."""
    found = plugin_key(file_name, key)
    if found is None or value is None:
        return []
    shipped = shipped_plugins(version).get(found.plugin_type)
    if shipped is None:
        return []  # the series has no files of this type: nothing to compare with
    items = [item.strip() for item in str(value).split(",")] if found.is_list else [str(value).strip()]
    return [problem for item in items if item and (problem := _item_problem(version, found, item, shipped))]


def _item_problem(version: str, found: PluginKey, item: str, shipped: frozenset[str]) -> str | None:
    if item in NO_FILE_NAMES.get(found.plugin_type, frozenset()):
        return None
    plugin_type, slash, name = item.partition("/")
    if not slash:
        if not found.bare_names:
            return f"{item!r} is not a plugin: write {found.plugin_type}/NAME"
        plugin_type, name = found.plugin_type, item
    if plugin_type != found.plugin_type:
        return f"{item!r} is a {plugin_type} plugin: this key takes {found.plugin_type}/NAME"
    if name in shipped or name == "none":
        return None
    listed = ", ".join(f"{plugin_type}/{one}" for one in sorted(shipped))
    return (
        f"Slurm {series(version)} has no {plugin_type}/{name} plugin"
        f" (no {plugin_type}_{name}.so in its Debian packages): {listed}"
    )
