"""Which Slurm node states can take a job now: the one home of that rule, and of the reading of
``scontrol --oneliner`` records the rules are applied to.

The smoke suite (which nodes a check may use), `cluster-cli status` (is the cluster healthy) and
the roles' filters (the deploy's post-check, slurm_nodes_not_ready; slurmd's batched restarts,
slurmd_not_reregistered) ask it. Standard library only: the smoke package imports it, so its copy
to a submit host carries this module too (smoke_control/remote.CARRIED_MODULES).

Its home is the collection's plugins/plugin_utils/ (the roles' filters import it from there, as
ansible_collections.cluster_cli.slurm.plugins.plugin_utils.node_states); cluster_cli/node_states.py
is a link to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

# Node states (sinfo %T) that accept new jobs; any flag suffix (`*` not responding, `~` powered
# off, `#` powering up, `!` pending power down, `%` powering down, `$` maintenance reservation,
# `@` pending reboot, `^` rebooting, `-` planned) means it cannot be counted on now.
USABLE_NODE_STATES = frozenset({"idle", "mixed", "allocated", "completing"})
STATE_FLAGS = "*~#!%$@^-"


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


# sinfo's states of a node some of whose resources are allocated (cluster_cli/stranded.py and the
# Slurm exporter: such a node with no job on it is capacity nobody can use). `draining` is sinfo's
# name for an allocated node with the drain flag (scontrol's MIXED+DRAIN, ALLOCATED+DRAIN).
ALLOCATED_NODE_STATES = frozenset({"mixed", "allocated", "draining"})


def is_allocated(state: str) -> bool:
    """``sinfo %T`` state: ``mixed``, ``allocated`` or ``draining`` (a flagged one, ``mixed*``, is
    not responding: status names that apart)."""
    return state.strip().lower() in ALLOCATED_NODE_STATES


_PAIR = re.compile(r"(\S+?)=(.*?)(?=\s\S+?=|$)")


def parse_scontrol_record(line: str) -> dict[str, str]:
    """``JobId=5 JobName=a b UserId=x(1)`` -> dict; values may contain spaces (JobName, Reason)."""
    return dict(_PAIR.findall(line.strip()))


def is_responding(state: str) -> bool:
    """Whether slurmctld hears from the node: not sinfo's ``idle*`` nor scontrol's ``IDLE*`` or
    ``IDLE+NOT_RESPONDING`` (scontrol writes the flag either way, by version)."""
    flags = state.strip().upper().split("+")
    return "NOT_RESPONDING" not in flags and not flags[0].endswith("*")


# Drain states: the node takes no new job until someone resumes it.
DRAIN_STATES = frozenset({"drain", "drained", "draining"})
# States `scontrol update State=RESUME` acts on (flags aside).
RESUMABLE_STATES = DRAIN_STATES | {"down", "fail", "failing"}


def is_resumable(state: str) -> bool:
    """``drained*`` too: a resume is what a node in a drain or down state waits for, answering or not."""
    return state.strip().rstrip(STATE_FLAGS).lower() in RESUMABLE_STATES


def held_by_operator(state: str, reason: str, set_by: str, slurm_user: str) -> bool:
    """A drain a person set (the reason's user is not SlurmUser, who sets Slurm's own drains such
    as "Low RealMemory"), on a node that responds: an operator's decision, which deploy leaves
    alone and does not count as a failure."""
    has_reason = bool(reason) and reason != "none"
    return has_reason and set_by not in ("", "Unknown", slurm_user) and state.strip().lower() in DRAIN_STATES
