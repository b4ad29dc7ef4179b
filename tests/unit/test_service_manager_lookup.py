"""plugins/lookup/service_manager.py: the one resolution of cluster_service_manager (plain Python,
no Ansible run; tests/ansible/test_daemon_piece.py runs the lookup inside ansible-playbook)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("service_manager_lookup", REPO / "plugins" / "lookup" / "service_manager.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


L = _load()


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
def test_resolve(requested: str, fact: str | None, expected: str) -> None:
    assert L.resolve(requested, fact) == expected


def test_without_the_fact_auto_is_standalone() -> None:
    assert L.resolve("auto") == "standalone"
