"""Lookup role_template: a role template's text, rendered with the task's variables.

    files:
      - dest: /etc/tmpfiles.d/slurm.conf
        content: "{{ lookup('cluster_cli.slurm.role_template', 'tmpfiles-slurm.conf.j2') }}"

The text ``lookup('ansible.builtin.template', NAME)`` gives for the roles' templates, found the
same way (the role's ``templates/`` first), without that lookup's deep copy of every variable
the task sees. The copy grows with the inventory (``groups``, ``play_hosts``, ``vars`` repeats them
all), and each host pays it once per template, so a deploy paid it hosts x hosts times. Here the
template sees the task's variables through a ChainMap whose first mapping takes what the template
adds, so nothing the task sees can change.

``ansible_managed`` is the task's variable of that name when it has one, else "Ansible managed"
(Ansible's default, which the ``ansible_managed`` setting deprecated in ansible-core 2.19 no longer
overrides here). The ``template_*`` variables of the builtin lookup are not set: no role template
uses them.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: role_template
author: cluster-cli maintainers (!UNKNOWN)
short_description: A role template's text, rendered with the task's variables without copying them
description:
  - Gives the text C(ansible.builtin.template)'s lookup gives for the role's templates, found the same way (the role's
    C(templates/) first), without that lookup's deep copy of every variable the task sees.
  - C(ansible_managed) is the task's variable of that name when it has one, else C(Ansible managed).
options:
  _terms:
    description: Names of templates in the role's C(templates/).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Write a file rendered from the role's template
  cluster_cli.slurm.cluster_files:
    files:
      - dest: /etc/tmpfiles.d/slurm.conf
        content: "{{ lookup('cluster_cli.slurm.role_template', 'tmpfiles-slurm.conf.j2') }}"
"""

RETURN = r"""
_raw:
  description: The rendered text of each template.
  type: list
  elements: str
"""

from collections import ChainMap
from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible.template import trust_as_template

ANSIBLE_MANAGED = "Ansible managed"


class LookupModule(LookupBase):
    def run(self, terms: list[str], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        variables = variables or {}
        return [self._render(term, variables) for term in terms]

    def _render(self, term: str, variables: dict[str, Any]) -> str:
        path = self.find_file_in_search_path(variables, "templates", term)
        if not path:
            raise AnsibleError(f"role_template: the template {term} was not found in the role's templates/")
        text = trust_as_template(self._loader.get_text_file_contents(path))
        added: dict[str, Any] = {}
        if "ansible_managed" not in variables:
            added["ansible_managed"] = ANSIBLE_MANAGED
        templar = self._templar.copy_with_new_env(available_variables=ChainMap(added, variables))
        return templar.template(text, escape_backslashes=False)
