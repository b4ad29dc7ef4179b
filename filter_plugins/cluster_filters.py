"""Jinja filters shared by the roles and playbooks of this repository.

ansible.cfg points ``filter_plugins`` here, so every run that uses it (cluster-cli, the role tests,
ansible-lint) has them. Each filter replaces logic that was written out in Jinja in several places,
or a ``{% set _ = list.append(...) %}`` loop, and returns exactly what that Jinja returned.
tests/unit/test_filter_plugins.py shows each one's behaviour, edge cases included.

The functions are plain Python on plain data (no Ansible objects needed), so the unit tests call
them directly.
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError


def service_manager(requested: str, service_mgr: str = "") -> str:
    """How daemons are run: ``cluster_service_manager`` resolved against the service_mgr fact.

    ``auto`` becomes ``systemd`` when the fact is ``systemd``, ``standalone`` otherwise; any other
    value is returned as it is (roles/common's preflight checks it is systemd or standalone).

        common_service_manager: "{{ cluster_service_manager | service_manager(ansible_facts.service_mgr | default('')) }}"
    """
    if requested != "auto":
        return requested
    return "systemd" if service_mgr == "systemd" else "standalone"


class FilterModule:
    """Ansible's entry point: the filters by name."""

    def filters(self) -> dict[str, Any]:
        return {
            "service_manager": service_manager,
        }
