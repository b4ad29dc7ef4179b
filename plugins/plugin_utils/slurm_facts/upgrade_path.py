"""Which Slurm upgrades SchedMD supports in one step (data/rules.json "upgrade")."""

from __future__ import annotations

from .facts import release_of, releases, rules


def upgrade_path_problem(from_version: str, to_version: str) -> str | None:
    """None when Slurm ``from_version`` can be upgraded to ``to_version`` directly (the same
    release, or one of the prior releases the target accepts); otherwise why not, naming the
    intermediate releases to go through. Raises UnknownSlurmVersion for a version of no known
    major release."""
    start, target = release_of(from_version), release_of(to_version)
    order = releases()
    if order.index(start) > order.index(target):
        return (f"Slurm {start} cannot be downgraded to {target}: reverting an upgrade is not supported once"
                " any Slurm daemon has started (SchedMD upgrade guide)")
    accepted = rules()["upgrade"]["upgrade_from"].get(target, [])
    if start == target or start in accepted:
        return None
    steps = path(start, target)
    daemons = ", then ".join(rules()["upgrade"]["order"])
    route = (f"upgrade through {' then '.join(steps)} first, each step {daemons}" if steps is not None
             else f"no chain of supported upgrades from {start} is known here")
    return (f"Slurm {target} upgrades directly only from {', '.join(accepted)}, not from {start}"
            f" (SchedMD upgrade guide, compatibility window): {route}")


def path(start: str, target: str) -> list[str] | None:
    """The intermediate releases of the shortest chain of supported upgrades: each step goes to the
    newest release before ``target`` that accepts the current one. None when there is no chain."""
    order, upgrade_from = releases(), rules()["upgrade"]["upgrade_from"]
    steps, current = [], start
    while current not in upgrade_from.get(target, []):
        candidates = [release for release in order[order.index(current) + 1:order.index(target)]
                      if current in upgrade_from.get(release, [])]
        if not candidates:
            return None
        current = candidates[-1]
        steps.append(current)
    return steps
