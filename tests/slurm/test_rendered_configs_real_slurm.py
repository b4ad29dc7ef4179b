"""The rendered configs are accepted by a real Slurm: slurmctld and three slurmd run from them.

A private instance per test, entirely under a temporary directory: its own munged (on its own
socket, with a munge key made by cluster-cli's secrets store), slurmctld and three
``slurmd -N`` on this host, with fake GPUs (character devices, major 195). Everything Slurm
reads comes from cluster-cli: the inventory is YAML text that goes through the model, the
files are written by cluster-cli's renderers into a build directory, and SLURM_CONF points at
the rendered slurm.conf (gres.conf, cgroup.conf and topology.conf sit beside it).

Ports come from 27000-27999 only, node names (rtnN) and job ids (FirstJobId) are unlikely to
meet other instances on this machine (Debian's multiple-slurmd build names cgroups
slurm_<node>). Daemons are stopped by the pid files they wrote, never by name.

Needs root and Debian's slurmctld, slurmd, slurm-client and munge packages; skips with the
reason otherwise. KEEP_SLURM_TEST_DIR=1 keeps the temporary directories (logs, rendered files).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster_cli.cluster import Cluster
from cluster_cli.loader import load_cluster_text
from cluster_cli.render import render_configs, write_files
from cluster_cli.secrets_store import ensure_secrets

pytestmark = pytest.mark.slurm

BINARIES = {
    "slurmctld": "/usr/sbin/slurmctld",
    "slurmd": "/usr/sbin/slurmd",
    "munged": "/usr/sbin/munged",
    "srun": "/usr/bin/srun",
    "scontrol": "/usr/bin/scontrol",
}
PORT_RANGE = range(27000, 28000)
NODES = ("rtn1", "rtn2", "rtn3")
FIRST_JOB_ID = 2_700_000
TIMEOUT = 60


def _missing_requirements() -> str | None:
    if os.geteuid() != 0:
        return "needs root (slurmd runs jobs as other users and makes device cgroups)"
    missing = [path for path in BINARIES.values() if not os.access(path, os.X_OK)]
    if missing:
        return f"needs the Debian Slurm and munge packages: {', '.join(missing)} not found"
    return None


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """``count`` consecutive free ports from 27000-27999 (a random block, so two runs rarely meet)."""
    starts = list(range(PORT_RANGE.start, PORT_RANGE.stop - count))
    random.shuffle(starts)
    for start in starts:
        block = list(range(start, start + count))
        if all(_port_is_free(port) for port in block):
            return block
    pytest.fail(f"no {count} consecutive free ports in {PORT_RANGE.start}-{PORT_RANGE.stop - 1}")


def inventory_text(root: Path, ctld_port: int, node_port: int, slurmd_port: int, topology: bool) -> str:
    """The test cluster as inventory YAML: three single-host nodes with one fake GPU each."""
    text = f"""\
cluster_name: rtest
hosts:
  - name: localhost
    connection: local
controllers:
  primary: localhost
  port: {ctld_port}
accounting:
  enabled: false
node_groups:
  - name: rt
    nodes: rtn[1-3]
    host: localhost
    base_port: {node_port}
    sockets: 1
    cores_per_socket: 1
    threads_per_core: 1
    real_memory_mb: 200
    gpus:
      count: 1
      type: fake
      devices: {root}/dev/nvidia[0-2]
      fake: true
partitions:
  - name: rtest
    nodes: [rt]
    default: true
    max_time: "00:10:00"
cgroup:
  version: v1
slurm:
  user: root
  slurmd_port: {slurmd_port}
  paths:
    conf_dir: {root}/build/slurm
    state_dir: {root}/state
    spool_dir: {root}/spool
    log_dir: {root}/log
    run_dir: {root}/run
  conf:
    AuthInfo: socket={root}/munge/munge.sock
    FirstJobId: {FIRST_JOB_ID}
    SlurmctldDebug: info
    SlurmdDebug: info
"""
    if topology:
        text += """\
topology:
  plugin: tree
  switches:
    - name: leaf1
      nodes: rtn[1-2]
    - name: leaf2
      nodes: rtn3
    - name: spine
      switches: leaf[1-2]
"""
    return text


@dataclass
class Instance:
    root: Path
    cluster: Cluster
    env: dict[str, str]

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            command, check=False, env=self.env, capture_output=True, text=True, timeout=TIMEOUT
        )
        if check and result.returncode != 0:
            pytest.fail(
                f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}{result.stderr}\n{self.logs()}"
            )
        return result

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*.log")) + [self.root / "munge" / "munged.log"]:
            if path.exists():
                parts.append(
                    f"--- {path.name} (last lines)\n"
                    + "\n".join(path.read_text(errors="replace").splitlines()[-25:])
                )
        return "\n".join(parts)

    def nodes(self) -> dict[str, dict[str, str]]:
        """``scontrol show node -o``, one dict of Key=Value per node."""
        nodes = {}
        for line in self.run("/usr/bin/scontrol", "show", "node", "-o").stdout.splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            nodes[fields["NodeName"]] = fields
        return nodes

    def wait_for(self, what: str, predicate, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.2)
        pytest.fail(f"timed out waiting for {what}\n{self.logs()}")


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(pid_files: list[Path]) -> None:
    """Stop the daemons these pid files name (TERM, then KILL after 15 s), and only them."""
    pids = [pid for pid in map(_read_pid, pid_files) if pid is not None]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _remove_node_cgroups() -> None:
    """slurmd leaves empty slurm_<node> cgroup directories behind; remove ours (rmdir: empty only)."""
    for node in NODES:
        for directory in Path("/sys/fs/cgroup").glob(f"*/slurm_{node}"):
            for child in sorted(directory.rglob("*"), key=lambda path: len(path.parts), reverse=True):
                if child.is_dir():
                    try:
                        child.rmdir()
                    except OSError:
                        pass
            try:
                directory.rmdir()
            except OSError:
                pass


@pytest.fixture
def start_instance() -> Iterator:
    reason = _missing_requirements()
    if reason:
        pytest.skip(reason)
    started: list[Path] = []
    roots: list[Path] = []

    def start(topology: bool = False) -> Instance:
        root = Path(tempfile.mkdtemp(prefix="ccli-slurm-", dir="/tmp"))
        roots.append(root)
        os.chmod(root, 0o755)
        ctld_port, slurmd_port, *node_ports = _free_ports(2 + len(NODES))
        text = inventory_text(root, ctld_port, node_ports[0], slurmd_port, topology)
        cluster = load_cluster_text(text, "real-slurm-test.yaml")
        assert [node.port for node in cluster.nodes] == node_ports

        # munge with the key cluster-cli's secrets store generates
        secrets = ensure_secrets(root / "secrets")
        munge_dir = root / "munge"
        munge_dir.mkdir(mode=0o700)
        key = munge_dir / "munge.key"
        shutil.copyfile(secrets.munge_key_path, key)
        os.chmod(key, 0o400)
        subprocess.run(
            [
                BINARIES["munged"],
                f"--socket={munge_dir / 'munge.sock'}",
                f"--key-file={key}",
                f"--pid-file={munge_dir / 'munged.pid'}",
                f"--log-file={munge_dir / 'munged.log'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
                "--force",
            ],
            check=True,
            capture_output=True,
            timeout=TIMEOUT,
        )
        started.append(munge_dir / "munged.pid")

        # the files Slurm reads, rendered by cluster-cli
        write_files(root / "build", render_configs(cluster, None))
        os.chmod(root / "build", 0o755)
        os.chmod(root / "build" / "slurm", 0o755)
        slurm_conf = root / "build" / "slurm" / "slurm.conf"

        # what Slurm does not create: state, spool, log and pid directories; the fake GPUs
        for directory in ("state", "log", "run", "dev"):
            (root / directory).mkdir()
        for node in cluster.nodes:
            (root / "spool" / node.name).mkdir(parents=True)
            for device in node.gpu_devices:
                minor = int(device.rsplit("nvidia", 1)[1])
                os.mknod(device, 0o666 | 0o020000, os.makedev(195, minor))

        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("SLURM_", "SBATCH_", "SRUN_"))
        }
        env["SLURM_CONF"] = str(slurm_conf)
        instance = Instance(root, cluster, env)

        instance.run(BINARIES["slurmctld"])
        started.append(root / "run" / "slurmctld.pid")
        instance.wait_for(
            "slurmctld to answer",
            lambda: instance.run("/usr/bin/scontrol", "ping", check=False).stdout.count("UP") >= 1,
        )
        for node in cluster.nodes:
            instance.run(BINARIES["slurmd"], "-N", node.name)
            started.append(root / "run" / f"slurmd-{node.name}.pid")
        instance.wait_for(
            "every node to be idle",
            lambda: all("IDLE" in fields.get("State", "") for fields in instance.nodes().values()),
        )
        return instance

    yield start

    # slurmd first (all at once), then slurmctld, then munged: a slurmd whose munged is gone
    # hangs on the way out
    _stop([path for path in started if path.name.startswith("slurmd-")])
    _stop([path for path in started if path.name == "slurmctld.pid"])
    _stop([path for path in started if path.name == "munged.pid"])
    _remove_node_cgroups()
    if os.environ.get("KEEP_SLURM_TEST_DIR") != "1":  # keep it to read the daemons' logs
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)


def test_rendered_configs_run_a_cluster_that_matches_the_model(start_instance):
    instance = start_instance()
    cluster = instance.cluster
    slurm_conf = (instance.root / "build" / "slurm" / "slurm.conf").read_text()
    # the node line really is the compressed form, with a Port list Slurm has to pair up
    assert re.search(
        r"^NodeName=rtn\[1-3\] NodeAddr=localhost Port=\[\d+-\d+\] NodeHostname=localhost ",
        slurm_conf,
        re.MULTILINE,
    )

    nodes = instance.nodes()
    assert sorted(nodes) == [node.name for node in cluster.nodes]
    for node in cluster.nodes:
        fields = nodes[node.name]
        group = node.group
        assert fields["CPUTot"] == str(group.sockets * group.cores_per_socket * group.threads_per_core)
        assert fields["RealMemory"] == str(group.real_memory_mb)
        assert fields["Gres"] == "gpu:fake:1"
        assert fields["Port"] == str(node.port)
        assert fields["State"] == "IDLE"
        assert fields["Partitions"] == "rtest"

    # GPU binding: the allocated fake GPU is exported to the job
    result = instance.run(
        "/usr/bin/srun", "--gres=gpu:1", "-N1", "-w", "rtn2", "printenv", "CUDA_VISIBLE_DEVICES"
    )
    assert result.stdout.strip() == "0"
    # one GPU per node: asking for two is refused
    refused = instance.run("/usr/bin/srun", "--gres=gpu:2", "-N1", "--immediate=5", "true", check=False)
    assert refused.returncode != 0
    # a job across the three nodes
    result = instance.run("/usr/bin/srun", "-N3", "hostname")
    assert len(result.stdout.splitlines()) == 3


def test_rendered_tree_topology_is_accepted(start_instance):
    instance = start_instance(topology=True)
    config = instance.run("/usr/bin/scontrol", "show", "config").stdout
    assert re.search(r"^TopologyPlugin\s*=\s*topology/tree$", config, re.MULTILINE)
    switches = {}
    for line in instance.run("/usr/bin/scontrol", "show", "topology").stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "SwitchName" in fields:
            switches[fields["SwitchName"]] = fields
    assert switches["leaf1"]["Level"] == "0" and switches["leaf1"]["Nodes"] == "rtn[1-2]"
    assert switches["leaf2"]["Level"] == "0" and switches["leaf2"]["Nodes"] == "rtn3"
    assert switches["spine"]["Level"] == "1" and switches["spine"]["Switches"] == "leaf[1-2]"
    result = instance.run("/usr/bin/srun", "-N3", "hostname")
    assert len(result.stdout.splitlines()) == 3
