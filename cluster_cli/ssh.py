"""The SSH transport: how cluster-cli's own commands reach a host that is not this machine (the
probe, the controller's Slurm commands, the remote smoke run); Ansible's runs reach them by the
same inventory settings."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from cluster_cli.cluster import ManagedHost


def ssh_argv(host: ManagedHost, command: Sequence[str], options: Sequence[str] = ()) -> list[str]:
    """ssh with the inventory's settings for ``host`` (and ``-o`` ``options`` before them);
    ``command`` is quoted for the remote shell, and run as root: through ``sudo -n`` (passwordless
    sudo, never a prompt) when the SSH user is not root, as Ansible's tasks are (ansible_become)."""
    if host.ssh.user != "root":
        command = ["sudo", "-n", "--", *command]
    argv = ["ssh", *(part for option in options for part in ("-o", option)), "-o", "BatchMode=yes",
            "-p", str(host.ssh.port), "-l", host.ssh.user]
    if host.ssh.private_key:
        argv += ["-i", str(Path(host.ssh.private_key).expanduser())]
    if host.ssh.common_args:
        argv += shlex.split(host.ssh.common_args)
    return [*argv, host.address, "--", shlex.join(command)]
