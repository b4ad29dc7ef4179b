"""The unprivileged account that submits the smoke jobs."""

from __future__ import annotations

import os
import subprocess

from cluster_cli.smoke.suite_errors import SmokeSetupError
from cluster_cli.smoke.slurm import User


def ensure_user(name: str, create: bool, uid: int | None = None, gid: int | None = None) -> tuple[User, bool]:
    """Look the user up; as root (and when allowed) create it with useradd, with ``uid`` and a
    group of its name with ``gid`` when given. Returns (user, created).

    Only this host is changed: on a multi-host cluster the account must already exist with the
    same UID on every node (the deployment creates it on the login and compute hosts; a submit
    host without it gets the same ids here), or jobs fail at launch.
    """
    try:
        return User.lookup(name), False
    except KeyError:
        pass
    if not create:
        raise SmokeSetupError(f"test user {name!r} does not exist (and creating it was not allowed)")
    if os.geteuid() != 0:
        raise SmokeSetupError(f"test user {name!r} does not exist; only root can create it")
    ids: list[str] = []
    if gid is not None:
        _create_group(name, gid)
        ids += ["--gid", str(gid)]
    if uid is not None:
        ids += ["--uid", str(uid)]
    done = subprocess.run(
        ["useradd", "--create-home", "--shell", "/bin/bash", "--comment", "cluster-cli smoke tests", *ids, name],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SmokeSetupError(f"useradd {name} failed: {done.stderr.strip()}")
    return User.lookup(name), True


def _create_group(name: str, gid: int) -> None:
    """The user's own group with ``gid``, unless a group of that name exists already."""
    if subprocess.run(["getent", "group", name], capture_output=True, check=False).returncode == 0:
        return
    done = subprocess.run(["groupadd", "--gid", str(gid), name], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SmokeSetupError(f"groupadd {name} failed: {done.stderr.strip()}")

