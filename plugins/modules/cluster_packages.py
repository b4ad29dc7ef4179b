#!/usr/bin/python
"""The documentation of the action cluster_packages (plugins/action/cluster_packages.py), which runs on
the control node: ansible-doc and ansible-test read a module of the action's name, whose code never runs."""

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_packages
short_description: Install the Debian packages a host lacks, in one task result
description:
  - Runs C(dpkg-query) on the host (also in check mode) to tell which entries are missing or at another version than
    their pin; only then the C(ansible.builtin.apt) module runs, with every entry, a lock timeout of 600 s and package
    lists trusted for a day.
  - An action plugin; this file only documents it.
author: cluster-cli maintainers (!UNKNOWN)
options:
  names:
    type: list
    elements: str
    required: true
    description:
      - Packages, each C(name) or C(name=version).
  policy_rc_d:
    type: int
    description:
      - Passed to the apt module (C(101) keeps package scripts from starting services).
"""

EXAMPLES = r"""
- name: Install slurmd
  cluster_cli.slurm.cluster_packages:
    names: [slurmd]
    policy_rc_d: 101
"""

RETURN = r"""
dpkg_lines:
  type: list
  elements: str
  returned: always
  description: dpkg-query's answer from before any install, one C(name=version status) line per package.
missing:
  type: list
  elements: str
  returned: always
  description: The entries apt was asked for (empty when apt did not run).
absent:
  type: list
  elements: str
  returned: always
  description:
    - The packages of O(names) of which no version was installed before (pins dropped).
    - A daemon of such a package never ran on the host; a role's handler need not restart it before its first start.
"""
