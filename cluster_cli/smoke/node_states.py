"""Which Slurm node states can take a job now: the one home of that rule.

The smoke suite (which nodes a check may use), `cluster-cli status` (is the cluster healthy) and
the deploy's post-check (filter_plugins' slurm_nodes_not_ready) ask it. Standard library only: it
ships with the smoke package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Node states (sinfo %T) that accept new jobs; any flag suffix (`*` not responding, `~` powered
# off, `#` powering up, `!` pending power down, `%` powering down, `$` maintenance reservation,
# `@` pending reboot, `^` rebooting, `-` planned) means it cannot be counted on now.
USABLE_NODE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})


def unusable_nodes(nodes: Sequence[str], states: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """Target nodes that cannot take a job now, each with its state and Slurm's reason."""
    unusable = {}
    for node in nodes:
        if node not in states:
            unusable[node] = "unknown to Slurm (not in sinfo)"
            continue
        state, reason = states[node]
        if not is_usable(state):
            unusable[node] = state + (f" ({reason})" if reason and reason != "none" else "")
    return unusable


def is_usable(state: str) -> bool:
    """``sinfo %T`` state, flags included: ``idle`` is usable, ``idle*`` (not responding) is not."""
    return state.strip().lower() in USABLE_NODE_STATES
