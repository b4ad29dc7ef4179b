"""Inventory strings reach Ansible, which templates them: '{{ lookup('pipe', 'id') }}' in a path
would run a command on the control node. No key or value may hold '{{', '{%' or '{#'."""

from __future__ import annotations

import pytest

from unit_helpers import BASE, edit, line_of, problem, problems

from cluster_cli.loader import TEMPLATE_MARKERS

HOLDS = "holds '{{', '{%' or '{#': Ansible would evaluate it as a template, on the control node"


def test_a_lookup_in_a_path_is_refused_at_its_line():
    text = BASE + "training:\n  work_dir: \"/srv/{{lookup('pipe','id')}}\"\n"
    assert problems(text) == [
        problem(text, "work_dir:", "training.work_dir", f"\"/srv/{{{{lookup('pipe','id')}}}}\" {HOLDS}")
    ]


@pytest.mark.parametrize("marker", TEMPLATE_MARKERS)
def test_each_marker_is_refused_in_a_free_form_value_and_a_list(marker):
    text = BASE + f'training:\n  pip_args: ["--find-links=/w{marker}x"]\nnccl:\n  env:\n    NCCL_DEBUG: "I{marker}"\n'
    assert problems(text) == [
        problem(text, "pip_args:", "training.pip_args[0]", f"'--find-links=/w{marker}x' {HOLDS}"),
        problem(text, "NCCL_DEBUG:", "nccl.env.NCCL_DEBUG", f"'I{marker}' {HOLDS}"),
    ]


def test_a_key_with_a_marker_is_refused_besides_the_schema_problem():
    text = BASE + 'slurm:\n  conf:\n    "{{ x }}": 1\n'
    line = line_of(text, '"{{ x }}"')
    assert problems(text) == [
        f"inv.yaml:{line}: slurm.conf['{{{{ x }}}}']: '{{{{ x }}}}' {HOLDS}",
        f"inv.yaml:{line}: slurm.conf['{{{{ x }}}}']: '{{{{ x }}}}' is not a configuration key "
        "(letters and digits, e.g. KillWait)",
    ]


def test_a_value_reached_through_an_alias_is_reported_once():
    text = edit(BASE, "login: [head]", "login: &l [\"{{ x }}\"]\ntraining:\n  pip_args: *l")
    found = [line for line in problems(text) if HOLDS in line]
    assert found == [problem(text, "login: &l", "login[0]", f"'{{{{ x }}}}' {HOLDS}")]


def test_braces_that_start_no_template_are_fine():
    text = BASE + "slurm:\n  conf:\n    Prolog: /p{x}\n"
    assert problems(text) == []


@pytest.mark.parametrize("spelling", ["\\x7b{", "{\\u007b", "\\U0000007b\\x7b", "{\\\n  {"])
def test_a_marker_written_with_escapes_is_refused(spelling):
    text = BASE + f'training:\n  work_dir: "/srv/{spelling}x}}}}"\n'
    assert problems(text) == [problem(text, "work_dir:", "training.work_dir", f"'/srv/{{{{x}}}}' {HOLDS}")]
