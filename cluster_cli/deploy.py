"""deploy / teardown: render into the build directory, plan, retire removed nodes, run the playbook.

``deploy_cluster`` is the deploy's flow, in order: the plan and its gate, a lost record recovered,
removed nodes retired, the secrets rotated, the hosts and waves of the rollout, the playbook run
and the record of what was deployed; a ``DeployView`` (commands/deploy_verbs: the terminal) shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import Any, Protocol

import yaml

from cluster_cli.ansible.runner import (
    PlaybookOptions,
    PlaybookResult,
    TaskFailure,
    run_ad_hoc,
    run_playbook,
)
from cluster_cli import node_lifecycle, rollout, rotation
from cluster_cli.build import BuildDir, write_build, secrets_dir_for
from cluster_cli.cluster import Cluster
from cluster_cli.deployed import DeployedRecord, load_record
from cluster_cli.errors import ClusterCliError, ExitCode
from cluster_cli.host_files import HostFile, files_by_host
from cluster_cli.ownership import expected_secrets
from cluster_cli.paths import cluster_state_dir, default_build_dir, project_dir
from cluster_cli.plan import Impact, Plan, plan_cluster
from cluster_cli.probe import accounting_host
from cluster_cli.render.ansible_inventory import host_reach, render_retired_inventory
from cluster_cli.render.health_conf import with_host_health_texts
from cluster_cli.people_accounts import document_checksum as people_checksum, people_document
from cluster_cli.slurm_accounting import accounting_document, document_checksum

LOG_TAIL_LINES = 20
# daemon log tails are fetched (one ad-hoc Ansible run each) for this many failed hosts at most
LOG_TAIL_HOSTS = 10


@dataclass(frozen=True)
class Prepared:
    cluster: Cluster
    build: BuildDir

    @cached_property
    def record(self) -> DeployedRecord:
        """What the last deploy recorded: read once, for the plan, the hosts that left, the update."""
        return load_record(cluster_state_dir(self.cluster.name))

    @property
    def inventory_file(self) -> Path:
        return self.build.directory / "ansible" / "inventory.yml"

    @property
    def retired_inventory_file(self) -> Path:
        return self.build.directory / "ansible" / "retired.yml"

    @property
    def inventory_files(self) -> list[Path]:
        """The cluster's inventory, and the hosts that left it when this deploy must still reach them."""
        retired = self.retired_inventory_file
        return [self.inventory_file] + ([retired] if retired.is_file() else [])

    @property
    def var_files(self) -> list[Path]:
        ansible_dir = self.build.directory / "ansible"
        return [ansible_dir / "cluster_vars.yml", ansible_dir / "secret_vars.yml"]


def prepare(
    cluster: Cluster, inventory_path: Path, build_dir: Path | None = None, rotate_stamp: str | None = None,
) -> Prepared:
    """Generate missing secrets (with ``rotate_stamp``: new ones, the old kept beside them) and
    render every file; touches no host."""
    directory = build_dir or default_build_dir(cluster.name)
    secrets_dir = secrets_dir_for(cluster, inventory_path)
    return Prepared(cluster, write_build(cluster, directory, secrets_dir, rotate_stamp))


def write_extra_vars(prepared: Prepared, variables: dict[str, Any]) -> list[Path]:
    path = prepared.build.directory / "ansible" / "run_vars.yml"
    path.write_text(yaml.safe_dump(variables, sort_keys=True), encoding="utf-8")
    return [path]


def new_log_path(cluster: Cluster, verb: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return cluster_state_dir(cluster.name) / "logs" / f"{verb}-{stamp}.log"


def run(
    prepared: Prepared,
    playbook: str,
    options: PlaybookOptions,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    extra_var_files: list[Path] | None = None,
) -> PlaybookResult:
    return run_playbook(
        project_dir() / "playbooks" / playbook,
        prepared.inventory_files,
        prepared.var_files + (extra_var_files or []),
        new_log_path(prepared.cluster, Path(playbook).stem),
        options,
        on_event,
        hosts=len(prepared.cluster.hosts),
    )


def daemon_logs(cluster: Cluster, host: str, role: str | None) -> list[str]:
    """The log files worth showing when a task of ``role`` failed on ``host``."""
    log_dir = cluster.inventory.slurm.paths.log_dir
    managed = cluster.hosts.get(host)
    if role == "slurmctld":
        return [f"{log_dir}/slurmctld.log"]
    if role == "slurmdbd":
        return [f"{log_dir}/slurmdbd.log"]
    if role == "slurmd" and managed is not None:
        return [f"{log_dir}/slurmd-{node.name}.log" for node in managed.slurmd_nodes]
    if role == "munge":
        return ["/var/log/munge/munged.log"]
    return []


# The refusals of site.yml's secrets preflight (roles/munge/tasks/key_check.yml,
# roles/slurmdbd/tasks/password_check.yml): no daemon was touched, so no daemon log is worth showing.
SECRETS_CHECK_TASKS = frozenset({
    "Check that every host holds the control node's munge key",
    "Check that the database host holds the control node's password",
})


def failure_log_tails(prepared: Prepared, failure: TaskFailure) -> list[tuple[str, str]]:
    """Last lines of the failing daemon's logs, fetched from the host through Ansible."""
    if failure.unreachable or failure.task in SECRETS_CHECK_TASKS:
        return []
    tails = []
    for path in daemon_logs(prepared.cluster, failure.host, failure.role):
        code, output = run_ad_hoc(
            prepared.inventory_file, failure.host, ["tail", "-n", str(LOG_TAIL_LINES), path], timeout_s=60
        )
        tails.append((path, output if code == 0 else f"(could not read: {output[:200]})"))
    return tails


def _rendered_and_munge_key(prepared: Prepared) -> tuple[dict[str, str], bytes]:
    """The build's files by path (each host's health text too, host_health_path), and the munge key
    the hosts should hold."""
    rendered = with_host_health_texts({item.path: item.content for item in prepared.build.files}, prepared.cluster)
    return rendered, prepared.build.secrets.munge_key_path.read_bytes()


def expected_files(prepared: Prepared) -> dict[str, list[HostFile]]:
    """The files each host should hold after this deploy (checksums), without probing a host."""
    return files_by_host(prepared.cluster, *_rendered_and_munge_key(prepared))


def current_plan(prepared: Prepared, rotating: bool = False) -> tuple[Plan, dict[str, list[HostFile]]]:
    """Probe every host and compare it with the rendered build: what a deploy would change, and
    whether every host is this cluster's (``rotating``: the secrets being replaced are not held
    against a host)."""
    rendered, munge_key = _rendered_and_munge_key(prepared)
    secrets = expected_secrets(munge_key, prepared.build.secrets.db_password())
    return plan_cluster(prepared.cluster, rendered, munge_key, prepared.record, secrets, rotating)


def write_retired_inventory(prepared: Prepared) -> list[str]:
    """Write the inventory of the hosts that left the cluster with slurmd instances still
    recorded (site.yml stops them) into the fresh build; the hosts' names."""
    retired = prepared.record.retired(prepared.cluster.hosts)
    if retired:
        prepared.retired_inventory_file.write_text(render_retired_inventory(prepared.cluster, retired),
                                                   encoding="utf-8")
    return list(retired)


def record_deployed(
    prepared: Prepared, files: dict[str, list[HostFile]], hosts: list[str], keep: Collection[str] = (),
) -> None:
    """Remember what ``hosts`` now hold, so a later plan can tell a hand edit from a change, and
    how to reach them; hosts that left the inventory are forgotten (their slurmd was stopped), but
    those in ``keep`` (failed this time: the next deploy must reach them again)."""
    record = prepared.record
    record.forget([host for host in set(record.hosts) | set(record.reach)
                   if host not in prepared.cluster.hosts and host not in keep])
    _record_hosts(prepared, files, hosts)


def _record_hosts(prepared: Prepared, files: dict[str, list[HostFile]], hosts: list[str]) -> None:
    """Write into the record what ``hosts`` hold and how to reach them, and save it."""
    record = prepared.record
    record.update(files, hosts)
    database = accounting_host(prepared.cluster)
    if database in hosts:
        record.remember_accounting(database, document_checksum(accounting_document(prepared.cluster)))
    people = people_document(prepared.cluster.inventory)
    record.remember_people(people, people_checksum(people), hosts)
    record.remember_reach({host: entry for host, entry in host_reach(prepared.cluster).items() if host in hosts})
    record.save()


def recover_record(prepared: Prepared, files: dict[str, list[HostFile]], found: Plan) -> list[str]:
    """A lost deploy record, recovered: the hosts it does not know that hold this cluster's
    slurm.conf and munge key and that the plan finds nothing to change on hold exactly the
    rendered files, so they are recorded as deployed now (a later hand edit then shows as drift).
    Hosts with changes are recorded after the playbook, as always. The hosts recorded."""
    changing = {change.host for change in found.changes}
    hosts = [host for host in found.unrecorded if host not in changing]
    if hosts:
        _record_hosts(prepared, files, hosts)
    return hosts


def rollout_outcome(prepared: Prepared, result: PlaybookResult, retired: list[str]) -> rollout.Outcome:
    """What site.yml's run did to the cluster's hosts and to the hosts that left it."""
    cluster = prepared.cluster
    compute = [name for name, host in cluster.hosts.items() if host.slurmd_nodes]
    return rollout.outcome(result, set(cluster.hosts) | set(retired), compute, last_play("site.yml"))


def batch_vars(cluster: Cluster, batch: int) -> dict[str, int]:
    """Extra vars of ``deploy --batch``: at most ``batch`` slurmd instances restart at a time.

    The compute play takes ``deploy_slurmd_serial`` hosts at a time, and each host restarts
    ``slurmd_restart_batch`` of its instances at a time; with up to k instances on a host that is
    batch // k hosts of min(batch, k) instances, never more than ``batch`` (at least one host)."""
    per_host = max((len(host.slurmd_nodes) for host in cluster.hosts.values()), default=1) or 1
    return {"deploy_slurmd_serial": max(1, batch // per_host), "slurmd_restart_batch": min(batch, per_host)}


def limit_with_control_node(limit: str | None, cluster: Cluster) -> str | None:
    """``--limit`` plus the control node, so that site.yml's control-node preflight (the rendered
    files, the munge key's mode, every role's arguments) also runs in a limited deploy: Ansible
    leaves the implicit localhost out of any limit that does not name it. Unchanged when a cluster
    host is called localhost (the local cluster): naming it would widen the limit to that host."""
    if not limit or "localhost" in cluster.hosts:
        return limit
    return f"{limit},localhost"


def rollout_settings(cluster: Cluster, batch: int | None, max_fail: int | None) -> tuple[int | None, int]:
    """The waves' size (``--batch``, else the inventory's ``deploy.batch``) and their failure threshold
    (``--max-fail-percentage``, else ``deploy.max_fail_percentage``; unset: 0 in waves, a failed
    host stops the rollout, and 100 without, every host goes on as before)."""
    settings = cluster.inventory.deploy
    batch = batch or settings.batch
    max_fail = max_fail if max_fail is not None else settings.max_fail_percentage
    return batch, (max_fail if max_fail is not None else 0 if batch else 100)


def rollout_vars(cluster: Cluster, batch: int | None, max_fail: int) -> dict[str, int]:
    """Extra vars of the compute play: its waves (``batch_vars``) and ``deploy_max_fail_percentage``."""
    return {**(batch_vars(cluster, batch) if batch else {}), "deploy_max_fail_percentage": max_fail}


def last_play(playbook: str) -> str:
    """The name of a playbook's last play: a run that started it was not stopped before."""
    plays = yaml.safe_load((project_dir() / "playbooks" / playbook).read_text(encoding="utf-8"))
    return str(plays[-1]["name"])


class JobsStillRunning(ClusterCliError):
    """Nodes to remove still run jobs: they are drained, and the deploy stops before changing anything."""

    exit_code = ExitCode.CHANGES


def retire_nodes(cluster: Cluster, names: list[str], wait_s: float | None, requeue_jobs: bool) -> list[str]:
    """Drain the nodes the inventory no longer has and make sure no job runs on them.

    Their jobs are requeued with ``requeue_jobs``, waited for up to ``wait_s`` seconds with a
    wait, and otherwise the deploy stops (JobsStillRunning) with the nodes drained, so that it
    can be run again once the jobs end. Returns the job ids requeued."""
    node_lifecycle.drain(cluster, names, "removed from the inventory")
    busy = {node: jobs for node, jobs in node_lifecycle.running_jobs(cluster, names).items() if jobs}
    requeued: list[str] = []
    if busy and requeue_jobs:
        requeued = sorted({job for jobs in busy.values() for job in jobs})
        node_lifecycle.requeue(cluster, requeued)
        busy = node_lifecycle.wait_for_no_jobs(cluster, names, timeout_s=120)
    elif busy and wait_s is not None:
        busy = node_lifecycle.wait_for_no_jobs(cluster, names, timeout_s=wait_s)
    if busy:
        held = "; ".join(f"{node}: job {', '.join(jobs)}" for node, jobs in sorted(busy.items()))
        raise JobsStillRunning(
            f"drained the nodes to remove, but jobs still run on them ({held}). Nothing else was changed: "
            f"run deploy again when they end, or with --wait SECONDS, or with --force to requeue them."
        )
    return requeued


def plan_exit_code(found: Plan, rotating: bool) -> int:
    """The plan's exit code; a rotation of the secrets is a change pending (3) of its own."""
    return ExitCode.CHANGES if rotating and found.exit_code == ExitCode.OK else found.exit_code


def rotate_secrets(
    prepared: Prepared, inventory_path: Path, build_dir: Path | None,
) -> tuple[Prepared, dict[str, list[HostFile]]]:
    """New secrets (the old kept beside them), the build rendered again with them, and the files
    each host should then hold."""
    rotated = prepare(prepared.cluster, inventory_path, build_dir, rotation.new_stamp())
    return rotated, expected_files(rotated)


@dataclass(frozen=True)
class DeployRequest:
    """What `cluster-cli deploy` was asked to do (its options)."""

    check: bool = False
    diff: bool = False
    limit: str | None = None
    tags: str | None = None
    verbose: int = 0
    full: bool = False
    wait_s: float | None = None
    force: bool = False
    batch: int | None = None
    max_fail: int | None = None
    rotate_secrets: bool = False


class DeployView(Protocol):
    """How a deploy shows its steps and runs its playbook (commands/deploy_verbs: on the terminal)."""

    def print(self, text: str, *, markup: bool = True, soft_wrap: bool = False) -> None: ...

    def header(self, prepared: Prepared) -> None: ...

    def plan(self, found: Plan, diff: bool, rotating: Cluster | None, dry_run: bool) -> None: ...

    def refused_plan(self, found: Plan) -> None: ...

    def rollout(self, rollout_vars: dict[str, int]) -> None: ...

    def run_site(
        self, prepared: Prepared, options: PlaybookOptions, verbose: int, extra_vars: dict[str, object],
        closing: Callable[[PlaybookResult], None],
    ) -> PlaybookResult: ...


def deploy_cluster(
    cluster: Cluster, inventory_path: Path, build_dir: Path | None, request: DeployRequest, view: DeployView,
) -> int | None:
    """Validate, render, plan, and apply what the plan says (all of site.yml with ``full``); the
    plan's exit code when only the plan was asked for (``check`` without ``full``), else None."""
    prepared = prepare(cluster, inventory_path, build_dir)
    view.header(prepared)
    rotating = cluster if request.rotate_secrets else None
    found, files = current_plan(prepared, rotating=request.rotate_secrets)
    if request.check and not request.full:
        view.plan(found, request.diff, rotating, dry_run=True)
        return plan_exit_code(found, request.rotate_secrets)
    if found.conflicts or found.unreachable:
        view.refused_plan(found)
        raise ClusterCliError("nothing was changed: " + "; ".join(found.conflicts + list(found.unreachable)))
    recovered = [] if request.check else recover_record(prepared, files, found)
    if recovered:
        view.print(f"the deploy record did not know {', '.join(recovered)}; they hold this cluster's files and "
                   "secrets: recorded from what they hold", markup=False, soft_wrap=True)
    if not found.changes and not request.full and not request.rotate_secrets:
        view.print("0 changes: every host matches the inventory; no playbook run (--full runs it anyway)")
        return None
    rotate = request.rotate_secrets and not request.check
    view.plan(found, request.diff, rotating, dry_run=not rotate)
    removed = [change.subject for change in found.by_impact(Impact.NODE_REMOVE)]
    if removed and not request.check:
        requeued = retire_nodes(cluster, removed, request.wait_s, request.force)
        view.print(f"drained {', '.join(removed)}" + (f"; requeued jobs {', '.join(requeued)}" if requeued else ""))
    if rotate:
        prepared, files = rotate_secrets(prepared, inventory_path, build_dir)
        view.print(rotation.kept_line(prepared.build.rotated), markup=False, soft_wrap=True)
    limit, tags = request.limit, request.tags
    scope = None if request.full or limit or rotate else ",".join(found.hosts_to_apply())
    options = PlaybookOptions(check=request.check, diff=request.diff,
                              limit=limit_with_control_node(limit or scope, cluster), tags=tags,
                              verbosity=max(request.verbose - 1, 0))
    retired = write_retired_inventory(prepared)
    if retired and scope is not None:
        view.print(f"stopping slurmd on the hosts that left the inventory: {', '.join(retired)}")
    waves = rollout_vars(cluster, *rollout_settings(cluster, request.batch, request.max_fail))
    view.rollout(waves)
    extra_vars = {**waves, **(rotation.ROLE_VARIABLES if rotate else {})}
    planned = None if request.check or limit or tags else (
        list(cluster.hosts) if scope is None else found.hosts_to_apply())
    closing = partial(_close_deploy, view, prepared, files, planned, retired)
    try:
        view.run_site(prepared, options, request.verbose, extra_vars, closing)
    except (ClusterCliError, KeyboardInterrupt):
        if rotate:
            view.print(rotation.unfinished_note(prepared.build.rotated), markup=False, soft_wrap=True)
        raise
    return None


def _close_deploy(
    view: DeployView, prepared: Prepared, files: dict[str, list[HostFile]], planned: list[str] | None,
    retired: list[str], result: PlaybookResult,
) -> None:
    """The rollout's counts; the record of what was deployed gets the planned hosts that were (with
    --check, --limit or --tags, ``planned`` is None: nothing is recorded)."""
    found = rollout_outcome(prepared, result, retired)
    for line in rollout.count_lines(found):
        view.print(line, markup=False)
    if planned is not None and found.finished:
        deployed = set(found.deployed)
        record_deployed(prepared, files, [host for host in planned if host in deployed], keep=found.failed_hosts)
