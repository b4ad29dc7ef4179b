"""Run the smoke suite on the cluster's submit host over SSH, when that host is not this one.

The suite (``cluster_cli.smoke``, standard library only, with the modules of CARRIED_MODULES it
imports) and ``training/`` are copied as a tarball into a private temporary directory on the
submit host, run there with the host's
Python as ``python3 -m cluster_cli.smoke.on_submit_host``, and removed afterwards; progress and the
report come back as JSON lines (see ``cluster_cli.smoke.on_submit_host``).
"""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

import cluster_cli
from cluster_cli.cluster import Cluster, ManagedHost
from cluster_cli.errors import ClusterCliError
from cluster_cli.smoke import CHECKS, CheckResult, ProgressCallback, SmokeEvent, SmokeReport, SmokeTarget
from cluster_cli.ssh import ssh_argv

PACKAGE_DIR = Path(cluster_cli.__file__).resolve().parent
# The modules of cluster_cli outside the smoke package that the copy carries: what the package imports
# (standard library only, as the package itself).
CARRIED_MODULES = ("__init__.py", "node_states.py")
# Enough for every check's own timeout plus the copy; a hung SSH session does not hang us.
SETUP_SLACK_S = 300.0


class RemoteSmokeError(ClusterCliError):
    """The remote run could not start or did not send a report."""


def submit_host(cluster: Cluster, name: str | None = None) -> ManagedHost:
    """Where jobs are submitted from: ``name``, else the first login host, else the primary controller."""
    if name is not None:
        if name not in cluster.hosts:
            raise ClusterCliError(f"no host '{name}' in the inventory (hosts: {', '.join(cluster.hosts)})")
        return cluster.hosts[name]
    logins = cluster.inventory.login
    return cluster.hosts[logins[0] if logins else cluster.inventory.controllers.primary]


def _add_tree(archive: tarfile.TarFile, source: Path, name: str) -> None:
    for path in sorted(source.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            archive.add(path, arcname=f"{name}/{path.relative_to(source)}", recursive=False)


def bundle(target: SmokeTarget | Sequence[SmokeTarget]) -> bytes:
    """tar.gz of the smoke package, the training scripts and the target(s)."""
    targets = [target] if isinstance(target, SmokeTarget) else list(target)
    buffer = io.BytesIO()
    # dereference: cluster_cli/node_states.py is a link into the collection's plugin_utils
    with tarfile.open(fileobj=buffer, mode="w:gz", dereference=True) as archive:
        for module in CARRIED_MODULES:
            archive.add(PACKAGE_DIR / module, arcname=f"cluster_cli/{module}")
        _add_tree(archive, PACKAGE_DIR / "smoke", "cluster_cli/smoke")
        _add_tree(archive, targets[0].training_dir, "training")
        summaries = [each.summary() for each in targets]
        data = json.dumps(summaries[0] if isinstance(target, SmokeTarget) else summaries, indent=2).encode()
        info = tarfile.TarInfo("target.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _ssh(host: ManagedHost, command: Sequence[str], stdin: bytes | None = None, timeout: float = 120) -> str:
    done = subprocess.run(ssh_argv(host, command), input=stdin, capture_output=True, timeout=timeout, check=False)
    if done.returncode != 0:
        error = done.stderr.decode(errors="replace").strip().splitlines()
        raise RemoteSmokeError(
            f"{host.name}: `{shlex.join(command)}` failed (exit {done.returncode}): {' | '.join(error[-3:])}"
        )
    return done.stdout.decode(errors="replace").strip()


def run_remote_smoke(
    host: ManagedHost,
    target: SmokeTarget | Sequence[SmokeTarget],
    only: list[str] | None,
    progress: ProgressCallback | None,
) -> SmokeReport:
    """Run the suite on ``host``; returns its report (the run directory is on the cluster)."""
    workdir = _ssh(host, ["mktemp", "-d", "/tmp/cluster-cli-smoke.XXXXXXXX"])
    if not workdir.startswith("/tmp/cluster-cli-smoke."):
        raise RemoteSmokeError(f"{host.name}: mktemp printed {workdir!r}")
    try:
        _ssh(host, ["tar", "-xzf", "-", "-C", workdir], stdin=bundle(target))
        command = ["env", f"PYTHONPATH={workdir}", host.python, "-m", "cluster_cli.smoke.on_submit_host",
                   f"{workdir}/target.json", *(only or [])]
        targets = [target] if isinstance(target, SmokeTarget) else list(target)
        checks = len(only) if only else len(CHECKS)
        timeout = SETUP_SLACK_S + sum(each.check_timeout_s for each in targets) * checks
        return _stream(host, command, progress, timeout=timeout)
    finally:
        _ssh(host, ["rm", "-rf", "--", workdir])


def _stream(host: ManagedHost, command: list[str], progress: ProgressCallback | None, timeout: float) -> SmokeReport:
    other: list[str] = []
    report: SmokeReport | None = None
    error: str | None = None
    with subprocess.Popen(
        ssh_argv(host, command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        try:
            for line in process.stdout:
                try:
                    message = json.loads(line)
                except json.JSONDecodeError:
                    other.append(line.rstrip())
                    continue
                event = message.get("event")
                if event in ("start", "finish") and progress:
                    result = CheckResult.from_dict(message["result"]) if message.get("result") else None
                    where = (message["index"], message["total"], result, message.get("scope", ""))
                    progress(SmokeEvent(event, message["check"], *where))
                elif event == "report":
                    report = SmokeReport.from_dict(message["report"])
                elif event == "error":
                    error = message["message"]
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise RemoteSmokeError(f"{host.name}: the smoke run did not finish within {timeout:.0f} s") from None
    if error is not None:
        raise RemoteSmokeError(f"{host.name}: {error}")
    if report is None:
        tail = " | ".join(other[-5:]) or "no output"
        raise RemoteSmokeError(f"{host.name}: the smoke run ended (exit {process.returncode}) without a report: {tail}")
    return report
