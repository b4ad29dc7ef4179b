#!/usr/bin/python
"""The documentation of the action cluster_role_arguments (plugins/action/cluster_role_arguments.py), which
runs on the control node: ansible-doc and ansible-test read a module of the action's name, whose code never runs."""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_role_arguments
short_description: Check every role's arguments for every host it is applied to, in one task
description:
  - For each play given (its host pattern and the roles it applies), checks each host's variables against each
    role's C(meta/argument_specs.yml) entry point C(main), the role's defaults filling what the host does not set, with
    Ansible's ArgumentSpecValidator. No fork and no connection per host.
  - An action plugin; this file only documents it.
author: cluster-cli maintainers (!UNKNOWN)
options:
  plays:
    type: list
    elements: dict
    required: true
    description:
      - The plays, each with C(hosts) (a host pattern) and C(roles) (role names).
"""

EXAMPLES = r"""
- name: Check the roles' arguments for every host they are applied to
  cluster_cli.slurm.cluster_role_arguments:
    plays:
      - {hosts: cluster, roles: [common, munge, slurm_common]}
      - {hosts: slurm_compute, roles: [slurmd]}
"""

RETURN = r"""
"""
