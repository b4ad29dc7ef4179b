"""filter_plugins/cluster_filters.py: what each filter returns, edge cases included (plain Python,
no Ansible run). Each filter stands for Jinja the roles or playbooks used to spell out, and must
return what that Jinja returned."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cluster_filters", REPO / "filter_plugins" / "cluster_filters.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


F = _load()


def test_ansible_cfg_points_filter_plugins_here() -> None:
    text = (REPO / "ansible.cfg").read_text()
    assert "\nfilter_plugins = filter_plugins\n" in text


def test_every_filter_is_registered_under_its_function_name() -> None:
    filters = F.FilterModule().filters()
    assert filters, "no filters"
    for name, function in filters.items():
        assert function is getattr(F, name), name


# ---- service_manager --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "fact", "expected"),
    [
        ("auto", "systemd", "systemd"),
        ("auto", "sysvinit", "standalone"),
        ("auto", "", "standalone"),
        ("auto", None, "standalone"),
        ("systemd", "sysvinit", "systemd"),  # an explicit choice wins over the fact
        ("standalone", "systemd", "standalone"),
        ("bogus", "systemd", "bogus"),  # passed through: roles/common's preflight rejects it
        ("", "systemd", ""),
    ],
)
def test_service_manager(requested: str, fact: str | None, expected: str) -> None:
    assert F.service_manager(requested, fact) == expected


def test_service_manager_without_the_fact_is_standalone() -> None:
    assert F.service_manager("auto") == "standalone"
