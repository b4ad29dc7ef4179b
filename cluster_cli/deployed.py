"""What the last successful deploy put on each host, kept on the control node.

`plan` tells a hand edit (drift) from a change the inventory asks for by this record: a host's
file that matches neither the rendered file nor what was deployed there was changed on the host.
Only checksums are kept, never file contents, so the record holds no secret. It also keeps how
each host is reached (Ansible's connection variables: addresses and key paths, never keys) and
the slurmd instances it runs, so that a host that leaves the inventory can still be reached to
stop them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_cli.host_files import HostFile

RECORD_NAME = "deployed.json"


@dataclass
class DeployedRecord:
    path: Path | None = None
    # host -> file path on the host -> sha256 deployed there (None: deployed as absent)
    hosts: dict[str, dict[str, str | None]] = field(default_factory=dict)
    # host -> {"connection": Ansible connection variables, "slurmd_nodes": [node names]}
    reach: dict[str, dict[str, Any]] = field(default_factory=dict)
    # accounting host -> sha256 of the accounting document deployed there (slurm_accounting)
    accounting: dict[str, str] = field(default_factory=dict)
    # {"document": the people document the last deploy applied (cluster_cli.people_accounts), "checksum": its
    # sha256, "hosts": host -> the sha256 of the document it was given last}
    people: dict[str, Any] = field(default_factory=dict)

    def knows(self, host: str, path: str) -> bool:
        return path in self.hosts.get(host, {})

    def deployed(self, host: str, path: str, sha256: str | None) -> bool:
        return self.hosts.get(host, {}).get(path, "") == sha256

    def update(self, files_by_host: dict[str, list[HostFile]], hosts: list[str]) -> None:
        for host in hosts:
            self.hosts[host] = {item.path: item.sha256 for item in files_by_host.get(host, [])}

    def remember_accounting(self, host: str, checksum: str) -> None:
        self.accounting = {host: checksum}

    def remember_people(self, document: dict[str, Any], checksum: str, hosts: list[str]) -> None:
        held = {host: value for host, value in self.people.get("hosts", {}).items() if host not in hosts}
        self.people = {"document": document, "checksum": checksum, "hosts": held | dict.fromkeys(hosts, checksum)}

    def people_held(self, host: str) -> tuple[str | None, dict[str, Any] | None]:
        """The checksum of the people document ``host`` was given last, and that document where it
        is the last one recorded (None: not known)."""
        checksum = self.people.get("hosts", {}).get(host)
        return checksum, self.people.get("document") if checksum == self.people.get("checksum") else None

    def remember_reach(self, reach: dict[str, dict[str, Any]]) -> None:
        self.reach.update(reach)

    def retired(self, current: Collection[str]) -> dict[str, dict[str, Any]]:
        """Hosts deployed with slurmd instances that ``current`` (the inventory's hosts) no longer has."""
        return {host: entry for host, entry in sorted(self.reach.items())
                if host not in current and entry.get("slurmd_nodes")}

    def forget(self, hosts: list[str]) -> None:
        for host in hosts:
            self.hosts.pop(host, None)
            self.reach.pop(host, None)
            self.accounting.pop(host, None)
            self.people.get("hosts", {}).pop(host, None)

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        staging = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        document = {"version": 1, "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "hosts": self.hosts,
                    "reach": self.reach, "accounting": self.accounting,
                    "people": self.people}
        staging.write_text(json.dumps(document, indent=1, sort_keys=True), encoding="utf-8")
        staging.replace(self.path)


def load_record(state_dir: Path) -> DeployedRecord:
    """The record in ``state_dir``; an empty one (nothing known) when there is none or it is unreadable."""
    path = state_dir / RECORD_NAME
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        hosts = {str(host): dict(files) for host, files in document.get("hosts", {}).items()}
        reach = {str(host): dict(entry) for host, entry in document.get("reach", {}).items()}
        accounting = {str(host): str(checksum) for host, checksum in document.get("accounting", {}).items()}
        people = dict(document.get("people", {}))
    except (OSError, ValueError, AttributeError, TypeError):
        hosts, reach, accounting, people = {}, {}, {}, {}
    return DeployedRecord(path, hosts, reach, accounting, people)
