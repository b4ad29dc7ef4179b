"""The host side of `cluster-cli plan`: one fast look at what a host runs now.

Standard library only: the control node sends this file's source to each host's Python (over
SSH, or runs it in-process for a local host) with a JSON request, and reads one JSON answer.
It changes nothing on the host.

Request: {"files": [{"path", "want", "secret"}], "pidfiles": {daemon: path or "" (found by name)},
          "programs": {daemon: Python module that runs it}, "ports": {daemon: [address, port]},
          "packages": [names], "pending_dir", "run_dir",
          "controller": {"conf", "state_dir"} or null,
          "owner": {"slurm_conf", "munge_key": {"path", "marker", "want"?},
                    "slurmdbd_conf": {"path", "marker", "want"?} or null} or null,
          "mounts": {"units_dir", "marker", "wanted": [unit names], "wanted_paths": [mount points]} or null}
Answer:  {"files": {path: {"sha256", "text"?} | {"absent": true} | {"error"}},
          "daemons": {daemon: {"pid", "started", "running"}},
          "ports": {daemon: true if something accepts connections on the port here},
          "owed": [markers in pending_dir], "slurmds": {"slurmd@NODE": facts} (every live one),
          "packages": {name: version or null},
          "controller": {"state_cluster_name", "nodes", "jobs", "error"} or null,
          "owner": {"cluster_name", "answering_cluster_name", "daemons", "munge_key", "slurmdbd_password"}
                   or null,
          "mounts": {"stale": [{"unit", "path", "mounted", "users": [pids]}] (cluster-cli's units not wanted),
                     "unmounted": [wanted mount points nothing is mounted on]} or null}

A file's text comes back only when it differs from the wanted checksum and is not secret;
a secret file (munge key, slurmdbd.conf) only ever sends its checksum. The owner facts send
less still: whether the munge key and the database password match the checksums the control
node sent ("ours", "other"), or that cluster-cli never installed them here ("unmarked").
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys

COMMAND_TIMEOUT_S = 20
PORT_TIMEOUT_S = 2.0
# The longest file text sent back for a diff; managed configs are far smaller.
MAX_TEXT_BYTES = 1_000_000


def file_facts(entry: dict) -> dict:
    path = entry["path"]
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return {"absent": True}
    except OSError as error:
        return {"error": f"{error.strerror}"}
    digest = hashlib.sha256(data).hexdigest()
    facts: dict = {"sha256": digest}
    if digest != entry.get("want") and not entry.get("secret") and len(data) <= MAX_TEXT_BYTES:
        facts["text"] = data.decode("utf-8", errors="replace")
    return facts


def root_filesystem(path: str) -> bool:
    """Whether ``path`` holds a root filesystem, as training/container_bundle.py takes one (a bin/)."""
    return os.path.isdir(os.path.join(path, "bin"))


def _boot_time() -> float:
    with open("/proc/stat", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("btime "):
                return float(line.split()[1])
    return 0.0


def _pid_from_file(pidfile: str) -> int | None:
    try:
        with open(pidfile, encoding="ascii") as handle:
            return int(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def find_daemon(daemon: str, program: str = "") -> int | None:
    """The pid of ``daemon`` ("slurmctld", "slurmd@NODE", "prometheus", ...) found among the running
    processes: Slurm 24.11+ started by systemd (--systemd) writes no pid file, nor do the packages'
    units. ``program``: what runs it where that is not a program of its name (a Python module)."""
    name, _, node = daemon.partition("@")
    for pid, argv in _processes():
        if _runs(argv, program or name) and (not node or _names_node(argv, node)):
            return int(pid)
    return None


def _runs(argv: list, program: str) -> bool:
    """Whether ``argv`` runs ``program``: its executable, or a Python module (``python -m program``)."""
    return os.path.basename(argv[0]) == program or argv[1:3] == ["-m", program]


def _processes():
    """Each running process's pid (text) and argv, where /proc lets it be read."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = [part.decode("utf-8", "replace") for part in handle.read().split(b"\0") if part]
        except OSError:
            continue
        if argv:
            yield entry, argv


def _names_node(argv: list, node: str) -> bool:
    return any(argv[index] == "-N" and argv[index + 1:index + 2] == [node] for index in range(len(argv)))


def process_facts(pidfile: str, boot_time: float, daemon: str = "", program: str = "") -> dict:
    """The pid in ``pidfile`` (else found by ``daemon``'s name, or ``program``) and when that process
    started (epoch seconds), if it runs."""
    pid = _pid_from_file(pidfile)
    if (pid is None or not os.path.exists(f"/proc/{pid}")) and daemon:
        pid = find_daemon(daemon, program)
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except (OSError, TypeError):
        return {"pid": None, "started": None, "running": False}
    # Field 22 (starttime, clock ticks after boot) counts from after the ")" closing comm.
    fields = stat[stat.rindex(")") + 2:].split()
    started = boot_time + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return {"pid": pid, "started": round(started, 2), "running": fields[0] not in ("Z", "X")}


def port_open(address: str, port: int) -> bool:
    """Whether a daemon accepts TCP connections on ``address``:``port`` of this host (the loopback
    address for Slurm's daemons and MariaDB, the host's own address for those that listen there only)."""
    try:
        with socket.create_connection((address, port), timeout=PORT_TIMEOUT_S):
            return True
    except OSError:
        return False


def _run(argv: list[str], env: dict | None = None, stdout_always: bool = False) -> tuple[int, str]:
    """Exit code and output: stdout on success (or with ``stdout_always``), else the error text."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env, check=False
        )
    except FileNotFoundError:
        return 127, f"{argv[0]}: not installed"
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(argv)}: no answer in {COMMAND_TIMEOUT_S} s"
    if done.returncode == 0 or stdout_always:
        return done.returncode, done.stdout
    return done.returncode, (done.stderr or done.stdout).strip()


def package_versions(names: list[str]) -> dict:
    versions: dict = {name: None for name in names}
    if not names:
        return versions
    # dpkg-query exits 1 when one of the names is not installed, and still lists the others.
    _, output = _run(["dpkg-query", "-W", "-f=${Package}|${Version}|${db:Status-Status}\n", *names],
                     stdout_always=True)
    for line in output.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0] in versions and parts[2] == "installed":
            versions[parts[0]] = parts[1]
    return versions


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def controller_facts(request: dict) -> dict:
    """The cluster name kept in StateSaveLocation, and nodes and jobs as slurmctld reports them."""
    env = dict(os.environ, SLURM_CONF=request["conf"])
    facts: dict = {
        "state_cluster_name": _read_text(os.path.join(request["state_dir"], "clustername")),
        "nodes": [],
        "jobs": [],
        "error": None,
    }
    # %N name, %T state, %E reason, %u who set it, %H when; --all: nodes of hidden partitions too.
    code, output = _run(["sinfo", "--all", "--noheader", "--Node", "--format=%N|%T|%u|%H|%E"], env)
    if code != 0:
        facts["error"] = output or f"sinfo exited {code}"
        return facts
    seen = set()
    for line in output.splitlines():
        parts = line.split("|", 4)
        if len(parts) == 5 and parts[0] not in seen:
            seen.add(parts[0])
            name, state, user, when, reason = parts
            facts["nodes"].append({"name": name, "state": state, "user": user, "time": when, "reason": reason})
    # every state: the jobs that ended within MinJobAge too, with their end (%e), for plan's
    # nodes allocated with no job (cluster_cli/stranded.py)
    code, output = _run(["squeue", "--all", "--noheader", "--states=all", "--format=%i|%T|%u|%N|%e"], env)
    if code == 0:
        for line in output.splitlines():
            parts = line.split("|")
            if len(parts) == 5:
                facts["jobs"].append({"id": parts[0], "state": parts[1], "user": parts[2], "nodes": parts[3],
                                      "end": parts[4]})
    return facts


def accounting_facts(request: dict) -> dict:
    """What slurmdbd holds, as the ``sacctmgr show`` commands of the request print it (their
    names to their output), or the first one's error."""
    env = dict(os.environ, SLURM_CONF=request["conf"])
    outputs = {}
    for name, argv in sorted(request["commands"].items()):
        code, output = _run(argv, env)
        if code != 0:
            return {"outputs": {}, "error": output or f"{' '.join(argv)} exited {code}"}
        outputs[name] = output
    return {"outputs": outputs, "error": None}


SLURM_DAEMONS = ("slurmctld", "slurmd", "slurmdbd")


def _pid_namespace(pid: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None  # not ours to read (another user's process, as a user other than root)


def running_programs(programs: tuple[str, ...]) -> list:
    """Which of ``programs`` run on this host (a process whose argv[0] is one of them), in one
    pass over /proc. A process of another PID namespace is a container's (a test bed's systemd
    hosts run under nspawn on the same kernel), not this host's; one whose namespace cannot be
    read counts."""
    own = _pid_namespace("self")
    found = set()
    for pid, argv in _processes():
        program = os.path.basename(argv[0])
        if program in programs and _pid_namespace(pid) in (own, None):
            found.add(program)
    return sorted(found)


def conf_cluster_name(path: str) -> str | None:
    """The ClusterName a slurm.conf sets (Slurm keys are case-insensitive; Slurm lowers the value)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, sep, value = line.split("#", 1)[0].partition("=")
                if sep and key.strip().lower() == "clustername":
                    return value.strip().lower() or None
    except OSError:
        return None
    return None


def _sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def secret_match(entry: dict, extract=None) -> str:
    """Whether a secret cluster-cli installed here (its marker exists) is the one whose checksum
    the control node sent: "ours" or "other"; "unmarked" when cluster-cli did not install it
    (a fresh host, a key the package made, a purged cluster); "unknown" when the control node
    sent no checksum or the file cannot be read. Only the verdict leaves the host."""
    if not os.path.exists(entry["marker"]):
        return "unmarked"
    if not entry.get("want"):
        return "unknown"
    try:
        with open(entry["path"], "rb") as handle:
            data = handle.read()
    except OSError:
        return "unknown"
    value = extract(data) if extract else data
    return "ours" if value is not None and _sha256_of(value) == entry["want"] else "other"


def storage_pass(data: bytes) -> bytes | None:
    """slurmdbd.conf's StoragePass value."""
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().lower() == "storagepass":
            return value.strip().encode("utf-8")
    return None


def answering_cluster_name(conf: str) -> str | None:
    """The ClusterName of the slurmctld that answers for ``conf`` (scontrol show config)."""
    code, output = _run(["scontrol", "show", "config"], dict(os.environ, SLURM_CONF=conf))
    if code != 0:
        return None
    for line in output.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "ClusterName":
            return value.strip().lower() or None
    return None


def owner_facts(request: dict) -> dict:
    """What tells which cluster this host belongs to: the ClusterName of the slurm.conf it holds,
    the Slurm daemons that run here, the ClusterName the slurmctld answers with (asked only where
    slurmctld runs here: a down controller would make scontrol wait), and whether the secrets
    cluster-cli installed here are the control node's."""
    daemons = running_programs(SLURM_DAEMONS)
    dbd = request.get("slurmdbd_conf")
    return {
        "cluster_name": conf_cluster_name(request["slurm_conf"]),
        "answering_cluster_name": answering_cluster_name(request["slurm_conf"]) if "slurmctld" in daemons else None,
        "daemons": daemons,
        "munge_key": secret_match(request["munge_key"]),
        "slurmdbd_password": secret_match(dbd, storage_pass) if dbd else "unmarked",
    }


def owed_actions(pending_dir: str) -> list:
    """The markers an unfinished deploy left (restart-slurmctld, restart-slurmd, reconfigure)."""
    try:
        return sorted(os.listdir(pending_dir))
    except OSError:
        return []


def running_slurmds(run_dir: str, boot_time: float) -> dict:
    """Every slurmd instance with a live pid file in ``run_dir``, wanted or not."""
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return {}
    found = {}
    for name in names:
        if name.startswith("slurmd-") and name.endswith(".pid"):
            facts = process_facts(os.path.join(run_dir, name), boot_time)
            if facts["running"]:
                found[f"slurmd@{name[len('slurmd-'):-len('.pid')]}"] = facts
    return found


def mount_facts(request: dict) -> dict:
    mounted = _mount_ids()
    return {"stale": stale_mounts(request, mounted),
            "unmounted": [path for path in request.get("wanted_paths", []) if path not in mounted]}


def stale_mounts(request: dict, mounted: dict) -> list:
    """cluster-cli's mount units in ``units_dir`` (the marker line in them) that are not ``wanted``,
    each with its mount point, whether it is mounted, and the processes that use it. Nothing here
    stats a path on the mount: a dead NFS server would hang the probe."""
    try:
        names = sorted(os.listdir(request["units_dir"]))
    except OSError:
        return []
    found = []
    for name in names:
        if not name.endswith(".mount") or name in request["wanted"]:
            continue
        where = _unit_where(os.path.join(request["units_dir"], name), request["marker"])
        if where is not None:
            mount_id = mounted.get(where)
            users = _mount_users(where, mount_id) if mount_id is not None else []
            found.append({"unit": name, "path": where, "mounted": mount_id is not None, "users": users})
    return found


def _unit_where(path: str, marker: str):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    if marker not in lines:
        return None
    return next((line[len("Where="):] for line in lines if line.startswith("Where=")), None)


def _mount_ids() -> dict:
    """Each mount point of this host and its mount id (/proc/self/mountinfo; the last mount on a path wins)."""
    ids = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                fields = line.split()
                point = fields[4].replace("\\040", " ")
                ids[point] = fields[0]
    except OSError:
        pass
    return ids


def _mount_users(where: str, mount_id: str) -> list:
    """The pids whose working or root directory lies in ``where``, or with a file open on its mount
    (fdinfo's mnt_id): what keeps `umount` from succeeding."""
    users = []
    below = where.rstrip("/") + "/"
    for pid, _ in _processes():
        if _uses(pid, where, below, mount_id):
            users.append(int(pid))
    return users


def _uses(pid: str, where: str, below: str, mount_id: str) -> bool:
    for link in ("cwd", "root"):
        try:
            target = os.readlink(f"/proc/{pid}/{link}")
        except OSError:
            continue
        if target == where or target.startswith(below):
            return True
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return False
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as handle:
                if f"mnt_id:\t{mount_id}\n" in handle.read():
                    return True
        except OSError:
            continue
    return False


def probe(request: dict) -> dict:
    boot_time = _boot_time()
    answer = {
        "owed": owed_actions(request["pending_dir"]) if request.get("pending_dir") else [],
        "slurmds": running_slurmds(request["run_dir"], boot_time) if request.get("run_dir") else {},
        "files": {entry["path"]: file_facts(entry) for entry in request.get("files", [])},
        "daemons": {name: process_facts(path, boot_time, name, request.get("programs", {}).get(name, ""))
                    for name, path in request.get("pidfiles", {}).items()},
        "ports": {name: port_open(address, port) for name, (address, port) in request.get("ports", {}).items()},
        "packages": package_versions(request.get("packages", [])),
        "controller": controller_facts(request["controller"]) if request.get("controller") else None,
        "owner": owner_facts(request["owner"]) if request.get("owner") else None,
        "accounting": accounting_facts(request["accounting"]) if request.get("accounting") else None,
        "mounts": mount_facts(request["mounts"]) if request.get("mounts") else None,
        "images": {path: root_filesystem(path) for path in request.get("images", [])},
    }
    return answer


def main() -> None:
    request = json.loads(sys.argv[1]) if len(sys.argv) > 1 else json.load(sys.stdin)
    json.dump(probe(request), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
