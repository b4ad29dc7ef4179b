"""Lookup service_manager: how this host runs daemons, ``systemd`` or ``standalone``.

    __munge_service_manager: "{{ lookup('cluster_cli.slurm.service_manager') }}"
    include_tasks: start_{{ lookup('cluster_cli.slurm.service_manager', daemon.manager | default('')) }}.yml


The one resolution of ``cluster_service_manager``: every role binds its own name to this lookup,
and roles/daemon (which starts, stops, restarts and waits for every daemon) calls it too. The fact
``common_service_manager`` wins where a play set it (roles/common's ``tasks_from:
service_manager``, for the plays that apply no role); otherwise ``cluster_service_manager``
(``auto`` where nothing sets it) is resolved against the ``service_mgr`` fact: ``auto`` is
``systemd`` when the fact is ``systemd``, ``standalone`` otherwise. Any other value is returned as
it is (roles/common's preflight checks it is systemd or standalone). A non-empty term is the manager
the caller already knows (playbooks/upgrade.yml: systemd only) and is returned as it is.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: service_manager
author: cluster-cli maintainers (!UNKNOWN)
short_description: How this host runs daemons, systemd or standalone
description:
  - The fact C(common_service_manager) where a play set it; otherwise C(cluster_service_manager) (C(auto) where
    nothing sets it) resolved against the C(service_mgr) fact, C(auto) being C(systemd) when the fact is C(systemd)
    and C(standalone) otherwise. Any other value is returned as it is.
options:
  _terms:
    description: The manager the caller already knows; when given and not empty, it is returned as it is.
    type: list
    elements: str
    required: false
"""

EXAMPLES = r"""
- name: Start the daemon the way this host runs daemons
  ansible.builtin.include_tasks: "start_{{ lookup('cluster_cli.slurm.service_manager') }}.yml"
"""

RETURN = r"""
_raw:
  description: C(systemd) or C(standalone) (or the value asked for).
  type: list
  elements: str
"""

from typing import Any

from ansible.plugins.lookup import LookupBase


def resolve(requested: str, service_mgr: str | None = "") -> str:
    """``cluster_service_manager`` resolved against the service_mgr fact."""
    if requested != "auto":
        return requested
    return "systemd" if service_mgr == "systemd" else "standalone"


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        if terms and terms[0]:
            return [str(terms[0])]
        variables = variables or {}
        resolved = self._value(variables, "common_service_manager", None)
        if resolved is not None:
            return [str(resolved)]
        facts = self._value(variables, "ansible_facts", None) or {}
        requested = str(self._value(variables, "cluster_service_manager", "auto"))
        return [resolve(requested, str(facts.get("service_mgr") or ""))]

    def _value(self, variables: dict[str, Any], name: str, default: Any) -> Any:
        if name not in variables:
            return default
        return self._templar.template(variables[name])
