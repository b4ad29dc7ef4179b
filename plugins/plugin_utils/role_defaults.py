"""A role variable's default, as its own role's defaults/main.yml sets it: the one reader of the
roles' defaults, for the roles' ``role_default`` filter (plugins/filter/cluster_filters.py) and for
the packages a bundle carries (cluster_cli/bundle/packages.py).

PyYAML (which ansible-core requires) and the standard library only. Its home is the collection's
plugins/plugin_utils/ (the filter imports it from there, as
ansible_collections.cluster_cli.slurm.plugins.plugin_utils.role_defaults); cluster_cli/role_defaults.py
is a link to it.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml


class RoleDefaultError(Exception):
    """No role has a default for the variable, or its default is a template (the filter raises it
    as Ansible's filter error, bundle/packages.py as cluster-cli's)."""


@functools.cache
def _defaults_of(defaults_file: Path) -> dict[str, Any]:
    return yaml.safe_load(defaults_file.read_text(encoding="utf-8")) or {}


def role_default(name: str, roles_dir: Path) -> Any:
    """The default of the role variable ``name`` (a copy) in ``roles_dir``.

    The owning role is the longest role name that prefixes ``name`` (``slurm_common_conf_dir``:
    slurm_common), else a shorter one that defines it. Only literal defaults: one that is a
    template would not be templated again."""
    roles_with_defaults = [path.parents[1].name for path in roles_dir.glob("*/defaults/main.yml")]
    owners = sorted((role for role in roles_with_defaults if name.startswith(role + "_")), key=len, reverse=True)
    for owner in owners:
        defaults = _defaults_of(roles_dir / owner / "defaults" / "main.yml")
        if name in defaults:
            value = defaults[name]
            if isinstance(value, str) and ("{{" in value or "{%" in value):
                raise RoleDefaultError(
                    f"role_default: {owner}'s default of {name} is a template ({value!r}), not a literal"
                )
            return copy.deepcopy(value)
    raise RoleDefaultError(f"role_default: no role under {roles_dir} has a default for {name}")
