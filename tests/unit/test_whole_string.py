"""Patterns match whole strings: Python's ``$`` also matches before a final newline, so
``re.match(r"^Key$", "Key\\n")`` succeeds and a key or name with a line break would pass."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import jinja2
import pytest
import yaml
from ansible.plugins.test.core import match as ansible_match
from ansible.plugins.test.core import regex as ansible_regex
from pydantic import Field, TypeAdapter, ValidationError

from unit_helpers import BASE, edit, problem, problems

from cluster_cli.model import Inventory
from cluster_cli.resolve.nodes import _check_node_names
from cluster_cli.resolve.problems import Problems
from cluster_cli.source_map import SourceMap

REPO = Path(__file__).resolve().parents[2]


def test_a_slurm_conf_key_with_a_trailing_newline_is_refused() -> None:
    text = BASE + 'slurm:\n  conf:\n    "KillWait\\n": 30\n'
    assert problems(text) == [
        problem(
            text,
            "KillWait",
            "slurm.conf['KillWait\\n']",
            "'KillWait\\n' is not a configuration key (letters and digits, e.g. KillWait)",
        )
    ]


def test_an_nccl_variable_with_a_trailing_newline_is_refused() -> None:
    text = BASE + 'nccl:\n  env:\n    "NCCL_DEBUG\\n": INFO\n'
    assert problems(text) == [
        problem(text, "NCCL_DEBUG", "nccl.env['NCCL_DEBUG\\n']", "'NCCL_DEBUG\\n' is not an NCCL variable (NCCL_...)")
    ]


def test_a_node_name_with_a_trailing_newline_is_refused() -> None:
    # the hostlist parser refuses white space first; this check must not rely on it
    found = Problems(SourceMap(yaml.compose(BASE)), "inv.yaml")
    _check_node_names(("node_groups", 0), ["gpu1\n"], {}, found)
    assert [problem.message for problem in found.found] == ["node name 'gpu1\n' is not a valid host name"]


# a value that matches, for every Field(pattern=...) of the model
PATTERN_SAMPLES = {
    r"^[A-Za-z0-9][A-Za-z0-9.-]*:[0-9]{1,5}$": "mail.example.org:587",
    r"^[^@\s,]+@[A-Za-z0-9][A-Za-z0-9.-]*$": "oncall@example.org",
    r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$": "gpu-1",
    r"^[a-z][a-z0-9_-]{0,39}$": "test",
    r"^[a-z0-9_][a-z0-9_.-]{0,63}$": "team-a",
    r"^[a-z_][a-z0-9_-]{0,31}$": "alice",
    r"^[A-Za-z0-9._~+/-]+$": "bookworm",
    r"^[A-Za-z0-9][A-Za-z0-9._+/-]*$": "main",
    r"^[0-9][0-9A-Za-z.+]*$": "2.3.1+cpu",
    r"^[A-Za-z0-9_.-]+==[0-9A-Za-z.+!-]+$": "numpy==1.26.4",
    r"^[1-9][0-9]*(h|d|w|y)$": "15d",
    r"^[a-z0-9][a-z0-9_+-]*(\.[a-z0-9][a-z0-9_+-]*)?$": "fuse.sshfs",
    r"^[^\s,]+$": "vers=4.2",
    r"^0?[0-7]{3}$": "0755",
    r"^[0-7]?[0-7]{3}$": "1777",
    r"^@?[A-Za-z0-9*?:][A-Za-z0-9*?._:/-]*$": "10.0.0.0/16",
    r"^[a-z_]+(=[A-Za-z0-9_:.@/-]+)?$": "sec=krb5p",
}


def _schema_patterns(node: Any) -> set[str]:
    if isinstance(node, dict):
        own = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
        return own.union(*(_schema_patterns(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(_schema_patterns(value) for value in node))
    return set()


def test_every_model_pattern_has_a_sample() -> None:
    assert _schema_patterns(Inventory.model_json_schema()) == set(PATTERN_SAMPLES)


@pytest.mark.parametrize("pattern", sorted(PATTERN_SAMPLES))
def test_pydantic_patterns_refuse_a_trailing_newline(pattern: str) -> None:
    # pydantic-core's Rust regex engine: '$' is the end of the text, never before a last '\n'
    adapter: TypeAdapter[str] = TypeAdapter(Annotated[str, Field(pattern=pattern)])
    assert adapter.validate_python(PATTERN_SAMPLES[pattern]) == PATTERN_SAMPLES[pattern]
    with pytest.raises(ValidationError):
        adapter.validate_python(PATTERN_SAMPLES[pattern] + "\n")
    assert re.match(pattern, PATTERN_SAMPLES[pattern] + "\n"), "Python's re would let it through"


def test_the_inventory_model_refuses_a_cluster_name_with_a_trailing_newline() -> None:
    text = edit(BASE, "cluster_name: test", 'cluster_name: "test\\n"')
    assert [line.split(": ", 2)[1] for line in problems(text)] == ["cluster_name"]


# Ansible's match and regex tests are Python's re.match and re.search: '$' lets a final
# newline through there too. Every regex the roles test input with, and a value it accepts.
ROLE_PATTERN_SAMPLES = {
    "__common_apt_uri_regex": "http://mirror.example/debian",
    "__slurmd_conf_server_regex": "10.0.0.1:6817,10.0.0.2:6817",
    "__slurmd_name_regex": "node1",
    "__slurmdbd_identifier_regex": "slurm_acct_db",
    "__training_env_torch_version_regex": "2.3.1",
    "__slurm_build_suffix_regex": "+cc1",
    "__nccl_memlock_regex": "unlimited",
    "__slurmdbd_name_regex": "research",
    "__training_env_package_regex": "numpy==2.4.6",
    "__prometheus_retention_regex": "15d",
}
_INLINE = re.compile(r"""(?:is (?:not )?|select\(|reject\()'?(?:match|regex|search)'?(?:\(|, )'([^']*)'""")


def _role_patterns() -> dict[str, str]:
    """The regexes of the roles' vars named ``__*_regex``."""
    found: dict[str, str] = {}
    for path in sorted(REPO.glob("roles/*/vars/main.yml")):
        for name, value in (yaml.safe_load(path.read_text()) or {}).items():
            if name.endswith("_regex"):
                found[name] = value
    return found


def test_role_patterns_anchored_at_the_end_use_backslash_z() -> None:
    patterns = _role_patterns()
    assert not [name for name, pattern in patterns.items() if pattern.endswith("$")]
    assert set(ROLE_PATTERN_SAMPLES) <= set(patterns)


def test_no_task_tests_input_with_an_inline_pattern_anchored_at_the_end() -> None:
    # inline, a Jinja string literal unescapes backslashes (\Z survives only as an invalid escape)
    inline = [
        (path.relative_to(REPO), literal)
        for path in sorted(REPO.glob("roles/*/tasks/*.yml"))
        for literal in _INLINE.findall(path.read_text())
        if literal.startswith("^") and literal.endswith(("$", "\\Z"))  # a whole value, not a file name's end
    ]
    assert inline == []


@pytest.mark.parametrize("name", sorted(ROLE_PATTERN_SAMPLES))
@pytest.mark.parametrize("test", ["match", "regex"])
def test_role_patterns_refuse_a_trailing_newline(name: str, test: str) -> None:
    # through Jinja with Ansible's own tests, as a task evaluates them
    environment = jinja2.Environment()
    environment.tests.update(match=ansible_match, regex=ansible_regex)
    template = environment.from_string(f"{{{{ value is {test}({name}) }}}}")
    value = ROLE_PATTERN_SAMPLES[name]
    assert template.render(value=value, **_role_patterns()) == "True"
    assert template.render(value=value + "\n", **_role_patterns()) == "False"
