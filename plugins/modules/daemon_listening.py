#!/usr/bin/python
"""Ansible module: wait until a daemon's ports listen, and fail at once when the daemon is gone.

A daemon that exits on a fatal error (a bad slurm.conf key, another cluster's state) never
listens; polling its port for the whole timeout only delays the failure. Each poll reads the
listening TCP ports from /proc/net/tcp{,6} (no connection: Slurm's daemons log one as an error)
and checks that the daemon still runs: each pid file names a live process, each systemd unit is
not `failed` or `inactive` (`activating` is still alive: a unit restarting on its own).
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: daemon_listening
short_description: Wait for a daemon's TCP ports; fail as soon as the daemon is gone
description:
  - Each poll reads the listening TCP ports from /proc/net/tcp and /proc/net/tcp6 (no connection, which Slurm's
    daemons would log as an error) and checks that the daemon still runs, each pid file naming a live process and
    each systemd unit not C(failed) or C(inactive).
author: cluster-cli maintainers (!UNKNOWN)
options:
  ports:
    type: list
    elements: int
    required: true
    description:
      - Local TCP ports that must listen.
  pidfiles:
    type: list
    elements: path
    default: []
    description:
      - Pid files that must name a live process.
  units:
    type: list
    elements: str
    default: []
    description:
      - systemd units that must not be failed or inactive.
  timeout:
    type: int
    default: 60
    description:
      - Seconds to wait for the ports.
"""

EXAMPLES = r"""
- name: Wait for slurmctld's port while its pid file names a live process
  cluster_cli.slurm.daemon_listening:
    ports: [6817]
    pidfiles: [/run/slurm/slurmctld.pid]
    timeout: 60
"""

RETURN = r"""
ports:
  type: list
  elements: int
  returned: always
  description: The ports waited for, sorted.
seconds:
  type: float
  returned: always
  description: How long it waited.
"""

import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule


TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
LISTEN = "0A"
DEAD_UNIT_STATES = ("failed", "inactive")


def listening_ports() -> set[int]:
    ports = set()
    for table in TCP_TABLES:
        try:
            with open(table, encoding="ascii") as rows:
                next(rows, None)
                for row in rows:
                    fields = row.split()
                    if len(fields) > 3 and fields[3] == LISTEN:
                        ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        except FileNotFoundError:
            continue
    return ports


def gone(pidfiles: list[str], units: list[str]) -> str | None:
    """Why the daemon no longer runs, or None while it does."""
    for path in pidfiles:
        try:
            with open(path, encoding="ascii") as handle:
                pid = int(handle.read().split()[0])
        except (OSError, ValueError, IndexError):
            return f"its pid file {path} is missing or empty"
        if not os.path.exists(f"/proc/{pid}"):
            return f"process {pid} (from {path}) has exited"
    for unit in units:
        state = subprocess.run(["systemctl", "is-active", unit], capture_output=True, text=True,
                               check=False).stdout.strip()
        if state in DEAD_UNIT_STATES:
            return f"{unit} is {state}"
    return None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "ports": {"type": "list", "elements": "int", "required": True},
            "pidfiles": {"type": "list", "elements": "path", "default": []},
            "units": {"type": "list", "elements": "str", "default": []},
            "timeout": {"type": "int", "default": 60},
        },
        supports_check_mode=True,
    )
    ports, started = sorted(set(module.params["ports"])), time.monotonic()
    while True:
        missing = [port for port in ports if port not in listening_ports()]
        waited = round(time.monotonic() - started, 1)
        if not missing:
            module.exit_json(changed=False, ports=ports, seconds=waited)
        reason = gone(module.params["pidfiles"], module.params["units"])
        if reason:
            module.fail_json(msg=f"the daemon stopped while waiting for port {missing} to listen: {reason} "
                                 f"(after {waited} s; its log says why)", ports=ports, seconds=waited)
        if waited >= module.params["timeout"]:
            module.fail_json(msg=f"port {missing} still not listening after {module.params['timeout']} s, "
                                 "the daemon still running", ports=ports, seconds=waited)
        time.sleep(1)


if __name__ == "__main__":
    main()
