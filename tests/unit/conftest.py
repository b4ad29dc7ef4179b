"""Shared settings for the unit tests.

Hypothesis profiles (pick one with HYPOTHESIS_PROFILE=...):
- ``unit`` (default): enough examples to catch regressions while the whole unit suite stays
  well under a minute on a 2-core machine.
- ``thorough``: ten times more examples, for a long local or nightly run.
"""

from __future__ import annotations

import os

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
