"""Jinja filters shared by the roles and playbooks of this repository.

The filters of the collection cluster_cli.slurm: the roles name them ``cluster_cli.slurm.NAME``,
and Ansible finds them wherever it finds the collection (installed, or through ansible.cfg's
collections_path in this repository). Each filter replaces logic that was written out in Jinja in several places,
or a ``{% set _ = list.append(...) %}`` loop, and returns exactly what that Jinja returned.
tests/unit/test_filter_plugins.py shows each one's behaviour, edge cases included.

The functions take plain data (lists, dicts, strings; hostvars for slurm_node_names, which a
dict of dicts stands in for), so the unit tests call them directly, without an Ansible run.

What they share with cluster-cli (the Slurm facts, node states, hostlists, the health check's file,
the roles' defaults) they import from the collection's plugins/plugin_utils/, its one home; they
need nothing beside ansible-core.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleFilterError, AnsibleUndefinedVariable
from ansible.module_utils.parsing.convert_bool import boolean
from jinja2 import Undefined
from jinja2.exceptions import UndefinedError

from ansible_collections.cluster_cli.slurm.plugins.plugin_utils.health_expectations import (
    HEALTH_REASON_PREFIX,
    HostHealthTexts,
    UnknownNode,
)
from ansible_collections.cluster_cli.slurm.plugins.plugin_utils.hostlist import compress
from ansible_collections.cluster_cli.slurm.plugins.plugin_utils.node_states import (
    held_by_operator,
    is_responding,
    is_usable,
    parse_scontrol_record,
)
from ansible_collections.cluster_cli.slurm.plugins.plugin_utils.role_defaults import (
    RoleDefaultError,
    role_default as owning_role_default,
)
from ansible_collections.cluster_cli.slurm.plugins.plugin_utils.slurm_facts import host_conf_change

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"


def daemon_instances(names: list[str], unit: str, pidfile: str, args: list[str] | None = None) -> list[dict[str, Any]]:
    """roles/daemon's instances of one daemon, one per name: ``{name}`` in ``unit``, ``pidfile`` and
    each of ``args`` replaced by the name.

        __slurmd_names | daemon_instances('slurmd@{name}.service', '/run/slurm/slurmd-{name}.pid', ['-D', '-s', '-N', '{name}'])
    """
    return [
        {
            "name": name,
            "unit": unit.replace("{name}", name),
            "pidfile": pidfile.replace("{name}", name),
            "args": [arg.replace("{name}", name) for arg in args or []],
        }
        for name in names
    ]


def role_default(name: str, roles_dir: str | Path | None = None) -> Any:
    """The default of the role variable ``name``, as its own role's defaults/main.yml sets it
    (plugin_utils/role_defaults.py, which cluster-cli's bundle reads the package lists with too).

    For a role that falls back on another role's variable, where that role's defaults are not in
    scope (another play): the fallback then stays defined once, in the owning role.

        __slurmd_conf_dir: "{{ slurm_common_conf_dir | default('slurm_common_conf_dir' | role_default) }}"

    The owning role is the longest role name that prefixes ``name`` (``slurm_common_conf_dir``:
    slurm_common). Only literal defaults: one that is a template would not be templated again.
    """
    try:
        return owning_role_default(name, Path(roles_dir) if roles_dir is not None else ROLES_DIR)
    except RoleDefaultError as error:
        raise AnsibleFilterError(str(error)) from None


_UNDEFINED = object()


def _jinja_int(value: Any, default: int = 0) -> int:
    """Jinja's ``int`` filter: int(), else int(float()) ("42.23" is 42), else ``default``."""
    try:
        return int(value, 10) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return default


def _lookup(mapping: Any, key: str) -> Any:
    """``mapping[key]``, or _UNDEFINED where Jinja's ``default()`` would take over: no such key, or a
    value that is undefined (a template naming an undefined variable, in hostvars)."""
    try:
        value = mapping[key]
    except (KeyError, IndexError, TypeError, UndefinedError, AnsibleUndefinedVariable):
        return _UNDEFINED
    return _UNDEFINED if isinstance(value, Undefined) else value


def slurm_node_names(hosts: list[str], hostvars: Any) -> list[str]:
    """Every Slurm node name of ``hosts``: each host's ``slurmd_nodes`` names, or its short host name
    where ``slurmd_nodes`` is undefined (the slurmd role's default). In host order, duplicates kept.

        __site_node_names: "{{ groups['slurm_compute'] | default([]) | slurm_node_names(hostvars) }}"

    As the Jinja loop it replaces rendered under ansible-core 2.19, an entry without a (defined) name
    is left out; the slurmd role's preflight rejects such an entry on its host.
    """
    names = []
    for host in hosts:
        host_vars = hostvars[host]
        nodes = _lookup(host_vars, "slurmd_nodes")
        if nodes is _UNDEFINED:
            nodes = [{"name": host_vars["inventory_hostname_short"]}]
        for node in nodes:
            name = _lookup(node, "name")
            if name is not _UNDEFINED:
                names.append(name)
    return names


def reasons_by_hosts(hosts: list[str], hostvars: Any, variable: str) -> list[str]:
    """Each reason of the hosts' ``variable`` ({reasons: [...]}, as slurm_conf_change returns) once,
    with the hosts that have it as a hostlist: "c[1-1000]: slurm.conf is new here: ...". In the
    order the reasons first appear; a host without the variable has none.

        msg: "{{ ansible_play_hosts | reasons_by_hosts(hostvars, 'slurm_common_change') }}"
    """
    hosts_of: dict[str, list[str]] = {}
    for host in hosts:
        change = _lookup(hostvars[host], variable)
        reasons = [] if change is _UNDEFINED else _lookup(change, "reasons")
        for reason in [] if reasons is _UNDEFINED else reasons:
            hosts_of.setdefault(reason, []).append(host)
    return [f"{compress(names)}: {reason}" for reason, names in hosts_of.items()]


def fake_gpu_device_items(gpus: list[dict], major: Any, mode: Any) -> list[dict[str, Any]]:
    """plugins/modules/cluster_files.py ``devices`` items of the fake GPUs: character devices
    ``major``:<minor> owned by root with ``mode`` (the numbers converted as Jinja's ``int`` does).

        devices: "{{ __slurmd_fake_gpus | fake_gpu_device_items(slurmd_fake_gpu_major, slurmd_fake_gpu_mode) }}"
    """
    return [{"path": gpu["path"], "major": _jinja_int(major), "minor": _jinja_int(gpu["minor"]),
             "owner": "root", "group": "root", "mode": str(mode)} for gpu in gpus]


def marked_block(text: str | None, marker: str, block: str, insertafter: str, present: Any,
                 path: str = "the file", before: str = "") -> str | None:
    """``text`` with the lines of ``block`` between ``# BEGIN marker`` and ``# END marker`` lines,
    as ansible.builtin.blockinfile writes them (``marker: "# {mark} <marker>"``): a block already
    there (both markers) is replaced in place; otherwise it goes after the last line that
    ``insertafter`` (a regex) matches, or at the end. With ``before`` (a regex) the block goes
    right before the first line that matches it instead, and a block found elsewhere is moved
    there (where order matters: a PAM stack). Not ``present``: the marked lines are taken
    out. None for a file that is not there and needs no lines; a file that is not there but
    needs them is an error (blockinfile without ``create``).

        files: "{{ [{'dest': path, 'content': contents[path] | marked_block(marker, block, '^@include', true)}] }}"
    """
    wanted = boolean(present, strict=False)
    if text is None:
        if wanted:
            raise AnsibleFilterError(f"marked_block: {path} does not exist, so its {marker} lines cannot go in")
        return None
    lines = text.splitlines(True)
    begin, end = f"# BEGIN {marker}\n", f"# END {marker}\n"
    body = block if block.endswith("\n") else block + "\n"
    new = [begin, *body.splitlines(True), end] if wanted and block else []
    first = last = None
    for number, line in enumerate(lines):
        if line == begin:
            first = number
        if line == end:
            last = number
    if first is not None and last is not None:
        at = min(first, last)
        del lines[at:max(first, last) + 1]
    if before:
        at = next((number for number, line in enumerate(lines) if re.search(before, line)), len(lines))
    elif first is None or last is None:
        matches = [number for number, line in enumerate(lines) if re.search(insertafter, line)]
        at = matches[-1] + 1 if matches else len(lines)
    if at > 0 and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    lines[at:at] = new
    return "".join(lines)


def found_in(paths: list[str], directory: str) -> list[str]:
    """The names of ``paths`` (a find's, over several directories) that lie right in ``directory``.

        __slurmd_markers: "{{ __slurmd_found.files | map(attribute='path') | list | found_in(__slurmd_pending_dir) }}"
    """
    parent = directory.rstrip("/") or "/"
    return [path.rsplit("/", 1)[1] for path in paths if (path.rsplit("/", 1)[0] or "/") == parent]


def ibv_devinfo_ports(text: str) -> list[dict[str, str]]:
    """The RDMA ports ``ibv_devinfo`` lists: [{device, port, state}], in its order.

    A ``hca_id:`` line starts a device, ``port:`` a port of it, and that port's ``state:`` line
    (PORT_ACTIVE, PORT_INIT...) completes the entry; a state before any port is ignored. Used by
    nccl_probe (not a filter of its own).
    """
    ports = []
    device = port = ""
    for line in text.splitlines():
        fields = line.split()
        if line.startswith("hca_id:") and len(fields) > 1:
            device, port = fields[1], ""
        elif len(fields) > 1 and fields[0] == "port:":
            port = fields[1]
        elif len(fields) > 1 and fields[0] == "state:" and port:
            ports.append({"device": device, "port": port, "state": fields[1]})
    return ports


def ib_hca_wanted(hca: str) -> list[dict[str, Any]]:
    """The adapters (and ports) an NCCL_IB_HCA value asks for: [{name, port, exact}].

    "mlx5_0,mlx5_1:1" (prefixes of device names, optional port), "=mlx5_0" (exact names); empty, or
    an exclusion list "^mlx5_2", asks for nothing to be checked. Blank items are skipped.

        __nccl_ib_wanted: "{{ __nccl_ib_hca | ib_hca_wanted }}"
    """
    if not hca or hca.startswith("^"):
        return []
    exact = hca.startswith("=")
    wanted = []
    for item in (part.strip() for part in hca.lstrip("=").split(",")):
        if item == "":
            continue
        parts = item.split(":")
        wanted.append({"name": parts[0], "port": parts[1] if len(parts) > 1 else "", "exact": exact})
    return wanted


def ib_ports_missing(wanted: list[dict[str, Any]], active: list[dict[str, str]]) -> list[str]:
    """The ``wanted`` adapters (ib_hca_wanted) without an ACTIVE port among ``active`` (ports of
    ibv_devinfo_ports), as "name" or "name:port". A name matches a device exactly when ``exact``,
    as a prefix otherwise; a wanted port must be that port.

        __nccl_missing: "{{ __nccl_ib_wanted | ib_ports_missing(__nccl_active) }}"
    """
    def matches(want: dict[str, Any], port: dict[str, str]) -> bool:
        if want["exact"]:
            device_ok = port["device"] == want["name"]
        else:
            device_ok = port["device"].startswith(want["name"])
        return device_ok and (not want["port"] or port["port"] == want["port"])

    return [
        want["name"] + (":" + want["port"] if want["port"] else "")
        for want in wanted
        if not any(matches(want, port) for port in active)
    ]


_SLURMD_NODE_OPTION = re.compile(r"\s-N\s*(\S+)")


def slurmd_pids(lines: list[str], node_names: list[str], default_node: str) -> list[str]:
    """The pids of the slurmd processes of this host's Slurm nodes, from ``pgrep --list-full``
    lines ("PID /usr/sbin/slurmd -D -s -N node1"). A slurmd without -N serves ``default_node`` (the
    short host name); with no ``node_names`` every slurmd counts. Blank lines are skipped. Used by
    nccl_probe (not a filter of its own).
    """
    pids = []
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        found = _SLURMD_NODE_OPTION.search(line)
        node = found.group(1) if found else default_node
        if not node_names or node in node_names:
            pids.append(fields[0])
    return pids


_MEMLOCK_LINE = re.compile(r"Max locked memory\s+(\S+)")
_PROBE_SECTION = re.compile(r"^== (\S+)$")


def _probe_sections(stdout: str) -> tuple[list[str], dict[str, list[str]]]:
    """The output of a role's one-task probe: the lines before the first "== NAME" header, and
    each header's lines by NAME (the nvidia and nccl probes write this shape)."""
    preamble: list[str] = []
    sections: dict[str, list[str]] = {}
    current = preamble
    for line in stdout.splitlines():
        header = _PROBE_SECTION.match(line)
        if header:
            current = sections.setdefault(header.group(1), [])
        else:
            current.append(line)
    return preamble, sections


def nccl_probe(stdout: str, node_names: list[str], default_node: str) -> dict[str, Any]:
    """What the one probe of roles/nccl (tasks/run.yml) found, from its sections: "== ibv_devinfo"
    (its output and errors, where nccl_infiniband), "== slurmd" (``pgrep --list-full --exact
    slurmd`` lines) and "== limits" ("PID Max locked memory SOFT HARD bytes" from /proc/PID/limits,
    "PID ?" where that file has no such line; a process gone by then has no line).

    Returns {devinfo (the ibv_devinfo text on one line), ib_ports (ibv_devinfo_ports), memlock
    ([{pid, memlock}] of the slurmd of this host's nodes, as slurmd_pids picks them; the soft
    limit, "unlimited" or bytes, or "?")}.

        __nccl_found: "{{ __nccl_probe.stdout | nccl_probe(__nccl_node_names, inventory_hostname_short) }}"
    """
    _order, sections = _probe_sections(stdout)
    devinfo = sections.get("ibv_devinfo", [])
    pids = slurmd_pids(sections.get("slurmd", []), node_names, default_node)
    limits: dict[str, str] = {}
    for line in sections.get("limits", []):
        fields = line.split()
        if fields:
            found = _MEMLOCK_LINE.search(line)
            limits.setdefault(fields[0], found.group(1) if found else "?")
    return {
        "devinfo": " ".join(" ".join(devinfo).split()),
        "ib_ports": ibv_devinfo_ports("\n".join(devinfo)),
        "memlock": [{"pid": pid, "memlock": limits[pid]} for pid in pids if pid in limits],
    }


def nvidia_smi_gpus(lines: list[str]) -> list[dict[str, Any]]:
    """The GPUs of ``nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,persistence_mode
    --format=csv,noheader`` lines: [{index (Jinja's int), name, driver_version, bus_id,
    persistence_mode}]. Lines with fewer than five ", "-separated fields are skipped. Used by
    nvidia_probe (not a filter of its own).
    """
    gpus = []
    for line in lines:
        fields = line.split(", ")
        if len(fields) >= 5:
            gpus.append({
                "index": _jinja_int(fields[0]),
                "name": fields[1],
                "driver_version": fields[2],
                "bus_id": fields[3],
                "persistence_mode": fields[4],
            })
    return gpus


def nvidia_probe(stdout: str, stderr: str = "") -> dict[str, Any]:
    """The state of the NVIDIA driver from the one probe of roles/nvidia (tasks/detect.yml): "KEY
    VALUE" lines (smi: nvidia-smi's exit status, or "-" where it is not installed; module: yes/no,
    /proc/driver/nvidia/version exists; nvswitches: a count; nvml_plugin: yes/no/-), then the
    sections "== nvidia-smi" (its stdout) and "== ldconfig" (``ldconfig -p``, where asked; only
    the lines naming libnvidia-ml are kept). ``stderr`` is nvidia-smi's.

    Returns {gpus (nvidia_smi_gpus), driver_version ('' without GPUs), driver_ok, driver_problem
    (why it does not work; meaningful only when not driver_ok), nvswitches (int), nvml_plugin
    (bool), ldconfig (text)}.

        __nvidia_state: "{{ __nvidia_probe.stdout | nvidia_probe(__nvidia_probe.stderr | default('')) }}"
    """
    preamble, sections = _probe_sections(stdout)
    keys: dict[str, str] = {}
    for line in preamble:
        key, _space, value = line.strip().partition(" ")
        if key:
            keys[key] = value.strip()
    smi = keys.get("smi", "-")
    installed = smi not in ("", "-")
    rc = _jinja_int(smi, 1) if installed else 1
    smi_lines = sections.get("nvidia-smi", [])
    gpus = nvidia_smi_gpus(smi_lines) if installed and rc == 0 else []
    if not installed:
        problem = "nvidia-smi is not installed"
    elif rc == 0:
        problem = "nvidia-smi lists no GPU"
    else:
        said = [text.strip() for text in smi_lines + stderr.splitlines() if text.strip()]
        problem = f"nvidia-smi exited {smi}: {said[0] if said else ''}"
    if keys.get("module") != "yes":
        problem += "; no NVIDIA kernel module is loaded (/proc/driver/nvidia/version is missing)"
    return {
        "gpus": gpus,
        "driver_version": gpus[0]["driver_version"] if gpus else "",
        "driver_ok": bool(gpus),
        "driver_problem": problem,
        "nvswitches": _jinja_int(keys.get("nvswitches", "0")),
        "nvml_plugin": keys.get("nvml_plugin") == "yes",
        "ldconfig": "\n".join(line for line in sections.get("ldconfig", []) if "libnvidia-ml" in line),
    }


def service_states(names: list[str], services: dict[str, Any], started: list[str] | None = None) -> list[str]:
    """Each unit of ``names`` as "NAME=STATE", from the service_facts ``services`` (keyed
    "NAME.service", or "NAME"); "NAME=not installed" where neither is there or it has no state.
    Units in ``started`` (just started with state: started) are "NAME=running", whatever the facts
    read before that said.

        __nvidia_service_states: >-
          {{ nvidia_services | service_states(ansible_facts.services | default({}), __nvidia_started_services) | join(', ') }}
    """
    states = []
    for name in names:
        if name in (started or []):
            states.append(f"{name}=running")
            continue
        service = _lookup(services, f"{name}.service")
        if service is _UNDEFINED:
            service = _lookup(services, name)
        state = _UNDEFINED if service is _UNDEFINED else _lookup(service, "state")
        states.append(f"{name}={'not installed' if state is _UNDEFINED else state}")
    return states


def conf_value(text: str, key: str) -> str:
    """The value of the first ``KEY=value`` line of a config text (nccl.conf), '' when it has none
    (NCCL sets each key from the file only when it is not set yet: the first line wins).

        __nccl_ib_hca: "{{ lookup('ansible.builtin.file', nccl_conf_src) | conf_value('NCCL_IB_HCA') }}"
    """
    for line in text.splitlines():
        name, sep, rest = line.partition("=")
        if sep and name.strip() == key:
            return rest.strip()
    return ""


def ldconfig_lib_path(text: str, library: str) -> str:
    """Where ``ldconfig -p`` says ``library`` (an exact name, e.g. libnvidia-ml.so.1) is, '' when
    it lists no such library. Lines look like ``\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/...``.

        __nvidia_so1: "{{ __nvidia_state.ldconfig | ldconfig_lib_path('libnvidia-ml.so.1') }}"
    """
    for line in text.splitlines():
        name, _space, rest = line.strip().partition(" ")
        if name == library and " => " in rest:
            return rest.split(" => ", 1)[1].strip()
    return ""


def slurm_nodes_not_ready(expected: list[str], sinfo_lines: list[str], slurm_user: str = "slurm") -> list[str]:
    """The ``expected`` Slurm nodes that cannot take a job yet, from ``sinfo --noheader --Node
    --format=%N|%T|%u|%E`` lines: not listed, in a state that is not usable (the rule of
    plugin_utils/node_states.py: ``idle*`` is not), or with a reason (a drain). A drain a person
    set (node_states.held_by_operator) is theirs to lift: such a node counts as ready; the node
    health check's drain (set as root too, reason ``cluster-cli health: ...``) is a failure. A node
    listed once per partition: the last line wins (they agree).

        __site_bad: "{{ __site_expected | slurm_nodes_not_ready(__site_sinfo.stdout_lines | default([]), 'slurm') }}"
    """
    rows = dict(line.split("|", 1) for line in sinfo_lines if "|" in line)
    ready = set()
    for node, rest in rows.items():
        state, _bar, rest = rest.partition("|")
        set_by, _bar, reason = rest.partition("|")
        operators = held_by_operator(state, reason, set_by, slurm_user) and not reason.startswith(HEALTH_REASON_PREFIX)
        if (is_usable(state) and reason == "none") or operators:
            ready.add(node)
    return [node for node in expected if node not in ready]


def slurmd_not_reregistered(before: str, after: str, names: list[str]) -> list[str]:
    """The ``names`` whose slurmd slurmctld has not yet seen start again since ``before``: from two
    ``scontrol --oneliner show node`` outputs, a node counts once its SlurmdStartTime differs from
    the one before the restart (slurmctld sets it when the new slurmd registers) and its state has
    no NOT_RESPONDING flag. A node slurmctld did not list before (new, or the command failed) only
    needs to be listed, answering.

        until: __slurmd_before.stdout | slurmd_not_reregistered(__slurmd_after.stdout, __slurmd_batch) == []
    """
    old, new = _slurmd_starts(before), _slurmd_starts(after)
    waiting = []
    for name in names:
        if name not in new or not is_responding(new[name][1]) or (name in old and new[name][0] == old[name][0]):
            waiting.append(name)
    return waiting


def _slurmd_starts(show_node: str) -> dict[str, tuple[str, str]]:
    """{node: (SlurmdStartTime, State)} from ``scontrol --oneliner show node`` lines."""
    records = [parse_scontrol_record(line) for line in show_node.splitlines()]
    return {record["NodeName"]: (record.get("SlurmdStartTime", ""), record.get("State", ""))
            for record in records if "NodeName" in record}


def slurm_conf_change(old_texts: dict[str, str | None], new_dir: str, version: str) -> dict[str, Any]:
    """What the change from the Slurm configuration on a host to the rendered one needs, by the
    rules of plugin_utils/slurm_facts for the host's Slurm ``version`` (their one home).

    ``old_texts``: each file in place by its path on the host (cluster_files' ``contents``; None:
    the file is not there); ``new_dir``: the directory on the control node holding the rendered
    files (a file missing there is not wanted). Returns {restart_slurmctld, restart_slurmd,
    restart_slurmdbd, reconfigure, impact, reasons, nodes_added, nodes_removed, series}. A version
    without rules ("" before Slurm is installed) gets the rules of the oldest series, said in the
    first reason.

        __slurm_common_change: >-
          {{ __slurm_common_in_place.contents | slurm_conf_change(slurm_common_config_src, __slurm_common_installed_version) }}
    """
    old = {Path(path).name: text for path, text in old_texts.items()}
    new = {name: _text_or_none(Path(new_dir) / name) for name in old}
    change, series = host_conf_change(version, old, new)
    return {
        "restart_slurmctld": change.restart_slurmctld,
        "restart_slurmd": change.restart_slurmd,
        "restart_slurmdbd": change.restart_slurmdbd,
        "reconfigure": change.reconfigure,
        "impact": change.impact,
        "reasons": list(change.reasons),
        "nodes_added": list(change.nodes_added),
        "nodes_removed": list(change.nodes_removed),
        "series": series,
    }


def _text_or_none(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def rendered_file_items(names: list[str], src_dir: str, dest_dir: str, mode: str = "0644") -> list[dict[str, str]]:
    """plugins/modules/cluster_files.py items of rendered files: each name's text read from ``src_dir``
    on the control node, for ``dest_dir`` on the host, owned by root."""
    return [{"dest": f"{dest_dir}/{name}", "content": (Path(src_dir) / name).read_text(encoding="utf-8"),
             "owner": "root", "group": "root", "mode": mode} for name in names]


def directory_items(paths: list[str], owner: str = "root", group: str = "root",
                    mode: str = "0755") -> list[dict[str, str]]:
    """plugins/modules/cluster_files.py items of directories with one owner, group and mode."""
    return [{"path": path, "owner": owner, "group": group, "mode": mode} for path in paths]


def marker_file_items(names: list[str], directory: str) -> list[dict[str, str]]:
    """plugins/modules/cluster_files.py items of empty marker files ``directory/name``, owned by root."""
    return [{"dest": f"{directory}/{name}", "content": "", "owner": "root", "group": "root", "mode": "0644"}
            for name in names]


def cluster_files_changes(contents: dict[str, str | None], items: list[dict[str, Any]],
                          absent: list[str]) -> list[str]:
    """The paths whose bytes a cluster_files run changes: of the files read (``contents``, None
    when not there), each item whose content differs and each ``absent`` path that is there."""
    written = [item["dest"] for item in items if contents.get(item["dest"], None) != item.get("content", "")]
    return written + [path for path in absent if contents.get(path) is not None]


def keys_mismatched(hosts: list[str], results: list[dict[str, Any]], checksum: str) -> list[str]:
    """The ``hosts`` whose key differs from ``checksum`` and carries the marker of a key cluster-cli installed.

    ``results``: each host's registered ``sha256sum -- KEY MARKER`` command (in the order of
    ``hosts``); a line "CHECKSUM  PATH" for each file that exists (a missing one is an error line on
    stderr). A host without the key or without the marker (a new host, a key the package made)
    passes.
    """
    mismatched = []
    for host, result in zip(hosts, results):
        key, marker = result["cmd"][-2:]
        sums = dict(reversed(line.split("  ", 1)) for line in result.get("stdout_lines", []) if "  " in line)
        if marker in sums and key in sums and sums[key] != checksum:
            mismatched.append(host)
    return mismatched


def health_config_text(document: str, nodes: list[str]) -> str:
    """A compute host's /etc/cluster-cli-health.json: its ``nodes`` (Slurm node names) out of the
    cluster's expectations, ``document`` (the text of BUILD_DIR/health/expectations.json), as `plan`
    expects it (plugin_utils/health_expectations.py makes it for both).

        'content': lookup('ansible.builtin.file', __slurmd_health_document) | health_config_text(__slurmd_names)
    """
    try:
        return HostHealthTexts(json.loads(document)).text(nodes)
    except UnknownNode as error:
        raise AnsibleFilterError(f"health_config_text: {error}") from None


def storage_host_mounts(mounts: list[dict[str, Any]], group_names: list[str]) -> list[dict[str, Any]]:
    """The mounts of roles/storage_client's ``mounts`` (cluster-cli's storage_client_mounts) this host
    mounts: those whose ``hosts_group`` it is in.

        __storage_client_host_mounts: "{{ storage_client_mounts | storage_host_mounts(group_names) }}"
    """
    return [mount for mount in mounts if mount["hosts_group"] in group_names]


def storage_unit_names(mounts: list[dict[str, Any]]) -> list[str]:
    """The unit files of ``mounts``: each one's .mount unit, and its .automount unit where it has one."""
    return [name for mount in mounts for name in (mount["unit"], mount.get("automount_unit") or "") if name]


def storage_start_units(mounts: list[dict[str, Any]]) -> list[str]:
    """The unit each of ``mounts`` is started and enabled by: its .automount where it has one, else its .mount."""
    return [mount.get("automount_unit") or mount["unit"] for mount in mounts]


def storage_stale_units(found: list[str], wanted: list[str]) -> list[str]:
    """The names of the units ``found`` (paths of cluster-cli's units on the host) that are not ``wanted``."""
    return sorted({Path(path).name for path in found} - set(wanted))


def storage_unit_paths(contents: dict[str, str | None], names: list[str], directory: str) -> dict[str, list[str]]:
    """Each mount point the units ``names`` (files of ``directory`` whose text ``contents`` holds, a
    cluster_files read) mount or automount (their Where= line), with those units."""
    paths: dict[str, list[str]] = {}
    for name in names:
        text = contents.get(f"{directory}/{name}") or ""
        where = next((line[len("Where="):] for line in text.splitlines() if line.startswith("Where=")), None)
        if where:
            paths.setdefault(where, []).append(name)
    return paths


def storage_fstab_paths(text: str | None, marker: str) -> list[str]:
    """The mount points of the lines in ``text``'s ``# BEGIN marker`` block (an fstab's second field)."""
    return [line.split()[1] for line in _block_lines(text, marker) if len(line.split()) > 1]


def storage_fstab_block(mounts: list[dict[str, Any]], kept: list[str], text: str | None, marker: str) -> str:
    """The fstab lines of ``mounts``, and the old block's lines of the ``kept`` paths (stale mounts
    still in use: they stay mounted, and the next deploy tries again)."""
    old = {line.split()[1]: line for line in _block_lines(text, marker) if len(line.split()) > 1}
    wanted = {mount["path"] for mount in mounts}
    return "\n".join([mount["fstab"] for mount in mounts] + [old[path] for path in kept if path in old and path not in wanted])


def _block_lines(text: str | None, marker: str) -> list[str]:
    lines = (text or "").splitlines()
    begin, end = f"# BEGIN {marker}", f"# END {marker}"
    if begin not in lines or end not in lines:
        return []
    return lines[lines.index(begin) + 1:lines.index(end)]


class FilterModule:
    """Ansible's entry point: the filters by name."""

    def filters(self) -> dict[str, Any]:
        return {
            "role_default": role_default,
            "daemon_instances": daemon_instances,
            "slurm_node_names": slurm_node_names,
            "reasons_by_hosts": reasons_by_hosts,
            "fake_gpu_device_items": fake_gpu_device_items,
            "marked_block": marked_block,
            "storage_host_mounts": storage_host_mounts,
            "storage_unit_names": storage_unit_names,
            "storage_start_units": storage_start_units,
            "storage_stale_units": storage_stale_units,
            "storage_unit_paths": storage_unit_paths,
            "storage_fstab_paths": storage_fstab_paths,
            "storage_fstab_block": storage_fstab_block,
            "found_in": found_in,
            "ib_hca_wanted": ib_hca_wanted,
            "ib_ports_missing": ib_ports_missing,
            "nccl_probe": nccl_probe,
            "nvidia_probe": nvidia_probe,
            "service_states": service_states,
            "conf_value": conf_value,
            "ldconfig_lib_path": ldconfig_lib_path,
            "slurm_nodes_not_ready": slurm_nodes_not_ready,
            "slurm_conf_change": slurm_conf_change,
            "rendered_file_items": rendered_file_items,
            "marker_file_items": marker_file_items,
            "directory_items": directory_items,
            "cluster_files_changes": cluster_files_changes,
            "slurmd_not_reregistered": slurmd_not_reregistered,
            "keys_mismatched": keys_mismatched,
            "health_config_text": health_config_text,
        }
