"""Shared settings for the unit tests.

Hypothesis profiles (pick one with HYPOTHESIS_PROFILE=...):
- ``unit`` (default): enough examples to catch regressions while the whole unit suite stays
  well under a minute on a 2-core machine.
- ``thorough``: ten times more examples, for a long local or nightly run.
"""

from __future__ import annotations

import os

import pytest

from hypothesis import HealthCheck, settings

settings.register_profile(
    "unit",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=600,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "unit"))


@pytest.fixture(autouse=True)
def _hosts_are_fresh_to_the_ownership_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verbs' ownership check (cluster_cli.ownership) probes the inventory's hosts: in a unit
    test each answers as a fresh host, never this machine's real cluster, which a test of the
    deploy may have left running (tests/unit/test_ownership.py fakes its own answers)."""
    from cluster_cli import ownership
    from cluster_cli.probe import HostProbe

    monkeypatch.setattr(ownership, "probe_hosts",
                        lambda cluster, requests: {name: HostProbe(name) for name in requests})
