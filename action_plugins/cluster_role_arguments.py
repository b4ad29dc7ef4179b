# Check, on the control node and in one task, every role's arguments for every host it is applied to.
#
# playbooks/site.yml applies its roles with import_role and rolespec_validate: false: Ansible's own
# check (a "Validating arguments against arg spec 'main'" task prepended to each role) would cost one
# task result per host and role. This action does the same check for all of them at once in the
# control-node preflight: for each play given (its host pattern and the roles it applies), each
# host's variables against each role's meta/argument_specs.yml entry point "main", the role's
# defaults filling what the host does not set, with Ansible's ArgumentSpecValidator (the one its
# validate_argument_spec action uses). No fork and no connection per host.
#
#   - name: Check the roles' arguments for every host they are applied to
#     cluster_role_arguments:
#       plays:
#         - {hosts: cluster, roles: [common, munge, slurm_common]}
#         - {hosts: slurm_compute, roles: [slurmd]}
#
# A failure names each host, role and option, with the validator's message; hosts with the same
# message for the same role are named on one line.
from __future__ import annotations

import os

from ansible import constants as C
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.inventory.manager import InventoryManager
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

DOCUMENTATION = r"""
---
module: cluster_role_arguments
short_description: Validate every role's arguments for every host it is applied to, on the control node
description:
  - For each play, resolves its host pattern against the inventory (restricted by --limit as Ansible does) and
    validates each host's variables, over the role's defaults, against the role's argument_specs entry point main.
options:
  plays:
    description: The plays whose roles are checked, each with C(hosts) (the play's host pattern) and C(roles).
    type: list
    elements: dict
    required: true
"""

NAMED_HOSTS = 10  # hosts named per failure line, then "and N more"


class _Role:
    """A role's main argument spec, its validator, its defaults and vars (loaded as Ansible loads them)."""

    def __init__(self, name: str, path: str, loader) -> None:
        self.name = name
        spec = loader.load_from_file(os.path.join(path, "meta", "argument_specs.yml")) or {}
        main = (spec.get("argument_specs") or {}).get("main")
        if main is None:
            raise AnsibleActionFail(f"role {name}: meta/argument_specs.yml has no entry point 'main'")
        self.options = main.get("options") or {}
        self.validator = ArgumentSpecValidator(self.options)
        self.secret = [option for option, spec in self.options.items() if spec.get("no_log")]
        self.defaults = self._load(loader, path, "defaults")
        self.vars = self._load(loader, path, "vars")

    @staticmethod
    def _load(loader, path: str, directory: str) -> dict:
        for name in ("main.yml", "main.yaml"):
            found = os.path.join(path, directory, name)
            if os.path.isfile(found):
                # trusted as templates, as Ansible loads a role's defaults and vars
                return loader.load_from_file(found, trusted_as_template=True) or {}
        return {}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        plays = self._task.args.get("plays")
        if not isinstance(plays, list) or not plays or not all(
            isinstance(play, dict) and isinstance(play.get("hosts"), str) and isinstance(play.get("roles"), list)
            for play in plays
        ):
            raise AnsibleActionFail("plays: a list of {hosts: PATTERN, roles: [ROLE, ...]} is required")

        inventory = self._inventory(task_vars)
        hostvars = task_vars["hostvars"]
        roles: dict[str, _Role] = {}
        host_vars: dict[str, dict] = {}
        failures: dict[tuple[str, str], list[str]] = {}  # (role, message) -> hosts, in order of finding
        checked = set()
        for play in plays:
            play_roles = [roles.setdefault(name, self._role(name, task_vars)) for name in play["roles"]]
            # Every role of a play sees the defaults of the play's roles, its own on top (Ansible's order).
            play_defaults: dict = {}
            for role in play_roles:
                play_defaults.update(role.defaults)
            layers = [{**play_defaults, **role.defaults, **role.vars} for role in play_roles]
            for host in (host.name for host in inventory.get_hosts(pattern=play["hosts"])):
                if host not in host_vars:
                    host_vars[host] = hostvars.raw_get(host)
                for role, layer in zip(play_roles, layers):
                    checked.add((host, role.name))
                    for message in self._validate(role, layer, host_vars[host], hostvars):
                        failures.setdefault((role.name, message), []).append(host)

        hosts = {host for host, _ in checked}
        result["changed"] = False
        result["checked"] = {"hosts": len(hosts), "host_roles": len(checked)}
        if failures:
            result["failed"] = True
            result["argument_errors"] = [
                {"role": role, "message": message, "hosts": names} for (role, message), names in failures.items()
            ]
            lines = [f"role {role} on {self._named(names)}: {message}" for (role, message), names in failures.items()]
            result["msg"] = "Validation of the roles' arguments failed:\n" + "\n".join(lines)
        else:
            result["msg"] = f"The arguments of {len(checked)} role applications on {len(hosts)} hosts passed"
        return result

    def _role(self, name: str, task_vars: dict) -> _Role:
        """The role named ``name`` from the playbook's roles/ directory or the roles_path."""
        bases = [os.path.join(task_vars.get("playbook_dir", ""), "roles"), *C.DEFAULT_ROLES_PATH]
        for base in bases:
            path = os.path.join(base, name)
            if os.path.isfile(os.path.join(path, "meta", "argument_specs.yml")):
                return _Role(name, path, self._loader)
        raise AnsibleActionFail(f"role {name}: no meta/argument_specs.yml under {', '.join(bases)}")

    def _inventory(self, task_vars: dict) -> InventoryManager:
        """The inventory's groups and hosts (as the inventory_hostnames lookup rebuilds them), restricted by
        --limit: a play's host pattern then selects the hosts its roles are applied to."""
        manager = InventoryManager(self._loader, parse=False)
        for group, hosts in task_vars["groups"].items():
            manager.add_group(group)
            for host in hosts:
                manager.add_host(host, group=group)
        manager.subset(task_vars.get("ansible_limit"))
        return manager

    def _validate(self, role: _Role, layer: dict, host: dict, hostvars) -> list[str]:
        """The validator's messages for one host's variables (over the role's defaults and vars)."""
        # Precedence as a task of the role sees it: role defaults < inventory and extra vars (``host``).
        # The role's vars (private __ROLE_ names, never an option) sit below the host's here, so
        # they only serve a default's template.
        variables = {"hostvars": hostvars, **layer, **host}
        given = {name: variables[name] for name in role.options if name in variables}
        try:
            values = self._templar.copy_with_new_env(available_variables=variables).template(given)
        except AnsibleError as error:
            return [f"cannot template its variables: {error.message}"]
        messages = role.validator.validate(values, validate_role_argument_spec=True).error_messages
        for name in role.secret:
            secret = values.get(name)
            if isinstance(secret, str) and secret:
                messages = [message.replace(secret, "********") for message in messages]
        return messages

    @staticmethod
    def _named(hosts: list[str]) -> str:
        shown = ", ".join(hosts[:NAMED_HOSTS])
        return shown if len(hosts) <= NAMED_HOSTS else f"{shown} and {len(hosts) - NAMED_HOSTS} more"
