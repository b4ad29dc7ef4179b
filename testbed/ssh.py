"""SSH access from the control node (root network namespace) to the hosts.

The hosts' addresses exist only inside the test bed's namespaces, so the
control node's ``ssh`` reaches them through a ProxyCommand that opens the
TCP connection from inside the bridge namespace:

    ProxyCommand nsenter --net=/run/netns/<bridge-ns> nc %h %p

``nc`` (netcat-openbsd) runs in the bridge namespace, connects to
<host>:22 over the bridge and relays bytes on its stdin/stdout; ssh itself
stays in the root namespace and speaks real SSH end to end with the host's
sshd (key auth, host key checked against a known_hosts file the test bed
wrote from the host keys it generated).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from .network import netns_path
from .proc import TestbedError, run


@dataclass(frozen=True)
class SshHost:
    name: str
    address: str
    user: str
    port: int
    key: str  # private key path
    common_args: list[str]  # ssh options (argv items) that make it work

    def argv(self, command: list[str] | None = None) -> list[str]:
        """An ssh argv that runs ``command`` (already one argv) on the host."""
        out = ["ssh", *self.common_args, "-i", self.key, "-p", str(self.port),
               f"{self.user}@{self.address}"]
        if command:
            out.append("--")
            out.append(shlex.join(command))
        return out


def proxy_command(bridge_ns: str) -> str:
    nc = shutil.which("nc") or "nc"
    return f"nsenter --net={netns_path(bridge_ns)} {nc} %h %p"


def check_client_tools() -> None:
    missing = [t for t in ("ssh", "ssh-keygen", "nc", "nsenter") if shutil.which(t) is None]
    if missing:
        raise TestbedError(
            "missing on the control node: " + ", ".join(missing)
            + " (apt-get install openssh-client netcat-openbsd util-linux)"
        )


def generate_keypair(path: Path, comment: str) -> str:
    """Create an ed25519 key pair at ``path`` (0600) unless present; return the public key."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])
    os.chmod(path, 0o600)
    return Path(str(path) + ".pub").read_text().strip()


def generate_host_key(directory: Path, comment: str) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    return generate_keypair(directory / "ssh_host_ed25519_key", comment)


def common_args(run_dir: Path, bridge_ns: str) -> list[str]:
    return [
        "-o", f"ProxyCommand={proxy_command(bridge_ns)}",
        "-o", f"UserKnownHostsFile={run_dir / 'known_hosts'}",
        "-o", "StrictHostKeyChecking=yes",
        # Ansible adds its own ControlPath (~/.ansible/cp/<hash>) only when the
        # arguments carry none: this keeps its masters per test bed (see
        # control_path_dir) even in an inventory that cluster-cli writes.
        "-o", f"ControlPath={control_path_dir(run_dir)}/%C",
        "-o", "IdentitiesOnly=yes",
        "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=10",
        "-o", "LogLevel=ERROR",
    ]


def write_client_files(run_dir: Path, bridge_ns: str, key: Path,
                       hosts: list[tuple[str, str, str]]) -> list[SshHost]:
    """Write known_hosts, ssh_config, inventory.yml and hosts.json into ``run_dir``.

    ``hosts``: (name, address, host public key).
    """
    args = common_args(run_dir, bridge_ns)
    known = "".join(f"{name},{addr} {pub.split()[0]} {pub.split()[1]}\n"
                    for name, addr, pub in hosts)
    (run_dir / "known_hosts").write_text(known)

    lines = ["# written by the test bed: ssh -F THIS_FILE <host>", ""]
    for name, addr, _pub in hosts:
        lines += [f"Host {name} {addr}", f"    HostName {addr}"]
        lines += _config_body(run_dir, bridge_ns, key)
        lines.append("")
    (run_dir / "ssh_config").write_text("\n".join(lines))

    ssh_hosts = [SshHost(name, addr, "root", 22, str(key), args) for name, addr, _ in hosts]
    cp_dir = control_path_dir(run_dir)
    cp_dir.mkdir(mode=0o700, exist_ok=True)
    (run_dir / "hosts.json").write_text(
        json.dumps([asdict(h) | {"ssh_common_args": shlex.join(h.common_args),
                                 "control_path_dir": str(cp_dir)}
                    for h in ssh_hosts], indent=2) + "\n"
    )
    (run_dir / "inventory.yml").write_text(ansible_inventory(ssh_hosts, cp_dir))
    return ssh_hosts


def control_path_dir(run_dir: Path) -> Path:
    """Where Ansible keeps its SSH ControlMaster sockets for this test bed.

    Ansible's default (~/.ansible/cp/<hash of address, port, user>) is shared
    by every test bed, and the same addresses recur from run to run: a master
    left over from an earlier bed (ControlPersist) would swallow connections
    to the new one and hang. A per-run directory, closed by ``down``, avoids it.
    """
    return run_dir / "cp"


def close_masters(run_dir: Path) -> list[str]:
    """Ask every ControlMaster of this test bed to exit (``ssh -O exit``)."""
    closed: list[str] = []
    cp_dir = control_path_dir(run_dir)
    if not cp_dir.is_dir():
        return closed
    for sock in sorted(cp_dir.iterdir()):
        if sock.is_socket():
            run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "testbed-host"],
                check=False, timeout=30)
            closed.append(sock.name)
        # a master may exit (and remove its socket) at any moment: gone is fine
        sock.unlink(missing_ok=True)
    shutil.rmtree(cp_dir, ignore_errors=True)
    return closed


def _config_body(run_dir: Path, bridge_ns: str, key: Path) -> list[str]:
    return [
        "    User root",
        "    Port 22",
        f"    IdentityFile {key}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {run_dir / 'known_hosts'}",
        "    StrictHostKeyChecking yes",
        f"    ControlPath {control_path_dir(run_dir)}/%C",
        "    BatchMode yes",
        "    ConnectTimeout 10",
        "    LogLevel ERROR",
        f"    ProxyCommand {proxy_command(bridge_ns)}",
    ]


def ansible_inventory(hosts: list[SshHost], cp_dir: Path) -> str:
    """A YAML inventory: every host in group ``testbed`` with its connection vars.

    Scalars are written as JSON strings, which are valid YAML.
    """
    out = ["# written by the test bed", "all:", "  children:", "    testbed:", "      hosts:"]
    for h in hosts:
        out.append(f"        {h.name}:")
        for k, v in (
            ("ansible_host", h.address),
            ("ansible_user", h.user),
            ("ansible_port", h.port),
            ("ansible_ssh_private_key_file", h.key),
            ("ansible_ssh_common_args", shlex.join(h.common_args)),
            ("ansible_python_interpreter", "/usr/bin/python3"),
            ("ansible_control_path_dir", str(cp_dir)),
        ):
            out.append(f"          {k}: {json.dumps(v)}")
    return "\n".join(out) + "\n"
