"""``deploy --rotate-secrets``: what it refuses, what the plan says about it, the role variables
it sets, and what the user is told about the old secrets. Paths only, never a secret."""

from __future__ import annotations

import time
from pathlib import Path

from cluster_cli.cluster import Cluster
from cluster_cli.errors import RefusedError

# The roles' switches: the preflight's comparison with the hosts' secrets is skipped, the key goes
# to every host (munged restarted on each) and MariaDB's user is altered before slurmdbd restarts.
ROLE_VARIABLES: dict[str, object] = {"munge_rotate_key": True, "slurmdbd_rotate_password": True}


def check_scope(limit: str | None, tags: str | None) -> None:
    """A new key must reach every host in one pass (a host left with the old one can no longer
    talk to the others): refuse ``--limit`` and ``--tags`` before anything is touched (exit 2)."""
    partial = [option for option, value in (("--limit", limit), ("--tags", tags)) if value]
    if partial:
        raise RefusedError(
            f"--rotate-secrets cannot be combined with {' or '.join(partial)}: the new munge key must reach "
            "every host in one pass, or the hosts left with the old one could no longer talk to the others. "
            "Nothing was changed."
        )


def new_stamp() -> str:
    """The suffix of the backups of one rotation (``munge.key.STAMP.old``), in UTC."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime())


def plan_lines(cluster: Cluster, dry_run: bool) -> list[str]:
    """What the rotation adds to the plan, one line per secret."""
    verb = "would get" if dry_run else "gets"
    lines = [f"secrets rotate: every host ({len(cluster.hosts)}) {verb} a new munge key in one pass; munged "
             "restarts on each (credentials in flight at that moment may be refused; running jobs keep running)"]
    if cluster.inventory.accounting.enabled:
        lines.append(f"secrets rotate: {cluster.inventory.accounting.host} {verb} a new database password: "
                     "the MariaDB user is altered, then slurmdbd restarts with the new slurmdbd.conf")
    if dry_run:
        lines.append("(--check: no secret was rotated)")
    return lines


def kept_line(backups: tuple[Path, ...]) -> str:
    if not backups:
        return "no earlier secrets to keep: new ones were made"
    return "the old secrets are kept (0600): " + ", ".join(str(path) for path in backups)


def unfinished_note(backups: tuple[Path, ...]) -> str:
    """What to do when the deploy that rotated the secrets did not finish."""
    return (
        "the secrets were rotated but the deploy did not finish: some hosts may still hold the old munge key "
        "or database password. Run cluster-cli deploy INVENTORY --rotate-secrets again once the cause is "
        f"fixed (new secrets, every host in one pass). {kept_line(backups)}"
    )
