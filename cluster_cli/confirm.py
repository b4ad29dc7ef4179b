"""Destructive verbs ask first: the operator types the cluster's name, or gives it with --yes.

Without a terminal and without --yes the answer is "no": a script must say which cluster it
means to destroy, it is never assumed.
"""

from __future__ import annotations

import sys

import click

from cluster_cli.cluster import Cluster
from cluster_cli.errors import RefusedError


class NotConfirmed(RefusedError):
    """The operator did not confirm with the cluster's name: nothing was touched (exit 2)."""


def ask_cluster_name(cluster: Cluster, action: str) -> str | None:
    """What the operator typed at the terminal; None when there is no terminal to ask at."""
    if not sys.stdin.isatty():
        return None
    return str(click.prompt(f"Type the cluster name ({cluster.name}) to {action}", default="", show_default=False))


def confirm_problem(cluster: Cluster, typed: str | None, action: str) -> str | None:
    """None when ``typed`` (from the terminal or --yes) is the cluster's name; else why not."""
    if typed is None:
        return f"to {action}, type the cluster name at a terminal, or give --yes {cluster.name}: nothing was touched"
    if typed.strip() != cluster.name:
        return f"'{typed.strip()}' is not this cluster's name ({cluster.name}): nothing was touched"
    return None


def require_confirmation(cluster: Cluster, yes_name: str | None, action: str) -> None:
    """Ask (or take --yes); raise NotConfirmed unless the answer is the cluster's name."""
    typed = yes_name if yes_name is not None else ask_cluster_name(cluster, action)
    problem = confirm_problem(cluster, typed, action)
    if problem:
        raise NotConfirmed(problem)
