"""Action cluster_packages: install the Debian packages a host lacks, in one task result.

    - name: Install slurmd
      cluster_cli.slurm.cluster_packages:
        names: "{{ __slurmd_packages }}"     # "name" or "name=version"
        policy_rc_d: 101                     # optional: no package script starts a service

One task, two steps on the host: ``dpkg-query`` (run as a plain command, also in check mode)
tells which entries are missing or at another version than their pin; only then the
``ansible.builtin.apt`` module runs (apt's python-apt cache costs seconds per call), with every
entry, a lock timeout of 600 s and package lists trusted for a day. It replaces the include of a
task file with a dpkg-query task and an apt task: three task results per host and role, each a
worker process, its templating and its results on the control node, for one.

Returns ``dpkg_lines`` (dpkg-query's answer from before any install: "munge=0.5.15-2 ii "),
``missing`` (the entries apt was asked for because of them; empty: apt did not run), ``absent``
(the packages of ``names`` no version of which was installed before: a daemon of one of them never
ran here, so a role's handler need not restart it before its first start) and apt's own result
keys when it ran. Its documentation (ansible-doc) is plugins/modules/cluster_packages.py.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ansible.plugins.action import ActionBase

DPKG_FORMAT = "${Package}=${Version} ${db:Status-Abbrev}\\n"
_INSTALLED = re.compile(" ii ?$")
APT_LOCK_TIMEOUT_S = 600
APT_CACHE_VALID_S = 86400


def package_name(entry: str) -> str:
    """The package of an entry, "name" or "name=version"."""
    return entry.split("=", 1)[0]


def dpkg_missing(wanted: list[str], dpkg_lines: list[str]) -> list[str]:
    """The entries of ``wanted`` ("name" or "name=version") dpkg does not have as wanted.

    Only installed packages (status ii) count; a plain name is satisfied by any installed version,
    name=version only by that version. Order and duplicates of ``wanted`` are kept.
    """
    installed = [line.split(" ")[0] for line in dpkg_lines if _INSTALLED.search(line)]
    have = installed + [package_name(entry) for entry in installed]
    return [package for package in wanted if package not in have]


def dpkg_absent(wanted: list[str], dpkg_lines: list[str]) -> list[str]:
    """The packages of ``wanted`` (pins dropped) of which dpkg has no version installed."""
    installed = {package_name(line.split(" ")[0]) for line in dpkg_lines if _INSTALLED.search(line)}
    return [package for package in map(package_name, wanted) if package not in installed]


def dpkg_query_command(names: list[str]) -> str:
    """The dpkg-query command line for the package names of ``names`` (pins dropped), quoted."""
    packages = [package_name(entry) for entry in names]
    return " ".join(shlex.quote(word) for word in ["dpkg-query", "--show", f"--showformat={DPKG_FORMAT}", *packages])


def apt_arguments(names: list[str], policy_rc_d: int | None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"name": names, "state": "present", "lock_timeout": APT_LOCK_TIMEOUT_S,
                                 "cache_valid_time": APT_CACHE_VALID_S}
    if policy_rc_d is not None:
        arguments["policy_rc_d"] = policy_rc_d
    return arguments


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("names", "policy_rc_d"))

    def run(self, tmp: str | None = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec={
            "names": {"type": "list", "elements": "str", "required": True},
            "policy_rc_d": {"type": "int"},
        })
        names: list[str] = args["names"]
        result.update(changed=False, dpkg_lines=[], missing=[], absent=[])
        if not names:
            return result
        # dpkg-query exits 1 when a name is unknown to dpkg; its output lists the others.
        query = self._low_level_execute_command(dpkg_query_command(names))
        lines = [line for line in query.get("stdout", "").splitlines() if line.strip()]
        result["dpkg_lines"] = lines
        result["missing"] = dpkg_missing(names, lines)
        result["absent"] = dpkg_absent(names, lines)
        if not result["missing"]:
            return result
        try:
            apt = self._execute_module(module_name="ansible.builtin.apt",
                                       module_args=apt_arguments(names, args["policy_rc_d"]),
                                       task_vars=task_vars)
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update({key: value for key, value in apt.items() if key != "invocation"})
        if apt.get("failed"):
            result["msg"] = f"apt could not install {' '.join(result['missing'])}: {apt.get('msg', '')}"
        return result
