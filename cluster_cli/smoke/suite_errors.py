"""The smoke suite's own errors (standard library only, like the whole package)."""

from __future__ import annotations


class SmokeSetupError(RuntimeError):
    """The suite cannot run at all (no Slurm client, no controller, no usable test user)."""


class CheckTimeout(RuntimeError):
    """A job or command outlived the check's time budget."""


class NodesUnusable(RuntimeError):
    """A check needs every target node and some cannot take jobs (down, drained, not responding)."""


class UnknownCheckError(ValueError):
    """Check names that are not in the suite (the message lists the known ones)."""
