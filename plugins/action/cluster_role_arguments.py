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
#     cluster_cli.slurm.cluster_role_arguments:
#       plays:
#         - {hosts: cluster, roles: [common, munge, slurm_common]}
#         - {hosts: slurm_compute, roles: [slurmd]}
#
# A failure names each host, role and option, with the validator's message; hosts with the same
# message for the same role are named on one line. Its documentation (ansible-doc) is
# plugins/modules/cluster_role_arguments.py.
from __future__ import annotations

import json
import os

from jinja2 import Environment, meta

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
    # Parses templates only to learn the variables they name (Ansible renders them).
    _jinja = Environment()
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
        templar = self._templar.copy_with_new_env(available_variables={})
        memo: dict = {}
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
                    for message in self._validate(role, layer, host_vars[host], hostvars, templar, memo):
                        failures.setdefault((role.name, message), []).append(host)

        hosts = {host for host, _role in checked}
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

    def _validate(self, role: _Role, layer: dict, host: dict, hostvars, templar, memo: dict) -> list[str]:
        """The validator's messages for one host's variables (over the role's defaults and vars)."""
        # Precedence as a task of the role sees it: role defaults < inventory and extra vars (``host``).
        # The role's vars (private __ROLE_ names, never an option) sit below the host's here, so
        # they only serve a default's template.
        variables = {"hostvars": hostvars, **layer, **host}
        values = {}
        for name in role.options:
            if name not in variables:
                continue
            value = variables[name]
            if self._is_template(templar, value, memo):
                try:
                    value = self._render(templar, value, variables, memo)
                except AnsibleError as error:
                    return [f"cannot template {name}: {error.message}"]
            values[name] = value
        # The same values give the same messages: most hosts share theirs (extra vars, defaults). Their
        # JSON text is the key, and what is validated when it is their whole (plain data: the validator's
        # deep copy of tagged values costs ten times more).
        unknown: list = []

        def kept_aside(found: object) -> str:
            unknown.append(found)
            return repr(found)

        try:
            text = json.dumps(values, sort_keys=True, default=kept_aside)
        except (TypeError, ValueError):
            text = None
        if text is not None and (role.name, text) in memo:
            return memo[role.name, text]
        plain = json.loads(text) if text is not None and not unknown else values
        messages = role.validator.validate(plain, validate_role_argument_spec=True).error_messages
        for name in role.secret:
            secret = values.get(name)
            if isinstance(secret, str) and secret:
                messages = [message.replace(secret, "********") for message in messages]
        if text is not None:
            memo[role.name, text] = messages
        return messages

    @staticmethod
    def _is_template(templar, value, memo: dict) -> bool:
        """Whether ``value`` holds a template; known once per object (defaults and extra vars are the same
        objects for every host, and stay alive while the action runs)."""
        key = ("is_template", id(value))
        if key not in memo:
            memo[key] = (templar.is_template(value), value)  # the value is kept: its id is not reused
        return memo[key][0]

    def _render(self, templar, value, variables: dict, memo: dict):
        """``value`` rendered in a host's variables, as Ansible's check renders it. Rendered once for all
        the hosts whose variables it reads (all it names, and what their templates name) are the same."""
        names = self._names(templar, value, variables, memo)
        key = None
        if names is not None:
            try:
                key = ("render", id(value), json.dumps([variables.get(name, "\0undefined") for name in names],
                                                       sort_keys=True, default=lambda found: f"<{type(found).__name__} {id(found)}>"))
            except (TypeError, ValueError):
                key = None
        if key is not None and key in memo:
            return memo[key][0]
        templar.available_variables = variables
        rendered = templar.template(value)
        if key is not None and names is not None:
            memo[key] = (rendered, value, [variables.get(name) for name in names])  # ids in the key stay alive
        return rendered

    def _names(self, templar, value, variables: dict, memo: dict) -> list[str] | None:
        """Every variable the templates of ``value`` name, and the variables their own templates name,
        sorted; None when a template cannot be parsed (it is then rendered for every host)."""
        found: set[str] = set()
        pending = [value]
        while pending:
            for text in self._template_strings(pending.pop()):
                key = ("names", text)
                if key not in memo:
                    try:
                        memo[key] = frozenset(meta.find_undeclared_variables(self._jinja.parse(text)))
                    except Exception:  # noqa: BLE001 - any parse failure: no shortcut
                        memo[key] = None
                if memo[key] is None:
                    return None
                for name in memo[key] - found:
                    found.add(name)
                    if name in variables and name != "hostvars" and self._is_template(templar, variables[name], memo):
                        pending.append(variables[name])
        return sorted(found)

    @classmethod
    def _template_strings(cls, value):
        if isinstance(value, str):
            if "{" in value:
                yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from cls._template_strings(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                yield from cls._template_strings(item)

    @staticmethod
    def _named(hosts: list[str]) -> str:
        shown = ", ".join(hosts[:NAMED_HOSTS])
        return shown if len(hosts) <= NAMED_HOSTS else f"{shown} and {len(hosts) - NAMED_HOSTS} more"
