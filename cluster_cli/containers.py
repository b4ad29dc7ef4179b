"""Slurm's own OCI container support (`srun --container=BUNDLE`, docs/containers.md): whether the
cluster sets it up (`containers.enabled`), the runtime's package, and oci.conf.

The one home of its rules: render/oci_conf.py, the roles' package lists, plan, probe, the bundle
and the override check ask here.

Why rootless runc: Slurm starts the container as the job's user, "with no special permissions"
(containers.html of 22.05 and 24.11, "Known limitations"), so a runtime that needs root cannot
serve it; runc and crun both run rootless, and Debian ships both (runc 1.1.5 on Debian 12,
1.1.15 on 13). runc is the one proven here (the local cluster's smoke check `container`).
"""

from __future__ import annotations

from cluster_cli.model import Inventory
from cluster_cli.slurm_facts import DEFAULT_SERIES, UnknownSlurmVersion, series

# The package of each runtime `containers.runtime` may name; compute hosts run it (slurmstepd calls
# it), login hosts too (users make their bundle's config.json there with `runc spec --rootless`).
RUNTIME_PACKAGES = {"runc": ("runc",)}
CONTAINER_ROLES = frozenset({"compute", "login"})

# Each series' oci.conf keys, spelled as its oci.conf(5) has them. Debian packages no oci.conf man
# page (slurm-client has none), so they are read from slurm-wlm-doc's oci.conf.html of each release:
# Debian 12's 22.05.8 and Debian 13's 24.11.5 (tests/unit/test_containers.py reads the installed
# page again where slurm-wlm-doc is installed). A series not here (26.05) is not checked.
OCI_CONF_KEYS: dict[str, frozenset[str]] = {
    "22.05": frozenset({
        "ContainerPath", "CreateEnvFile", "RunTimeCreate", "RunTimeDelete", "RunTimeKill", "RunTimeQuery",
        "RunTimeRun", "RunTimeStart",
    }),
    "24.11": frozenset({
        "ContainerPath", "CreateEnvFile", "DebugFlags", "DisableCleanup", "DisableHooks", "EnvExclude",
        "FileDebug", "IgnoreFileConfigJson", "MountSpoolDir", "RunTimeCreate", "RunTimeDelete", "RunTimeEnvExclude",
        "RunTimeKill", "RunTimeQuery", "RunTimeRun", "RunTimeStart", "SrunArgs", "SrunPath", "StdIODebug",
        "SyslogDebug",
    }),
}

# Where runc keeps its state (--root): the step's own bundle directory that slurmstepd makes (%b:
# SlurmdSpoolDir/oci-jobJJJJJ-SSSSS/, made by root in the root-owned spool directory, then chowned
# to the job's user, mode 0750), so no other user can make it first or read it, unlike the /tmp of
# Slurm's examples (any user can make /tmp/runc-<victim> before the victim's first job). One per
# step and node; RunTimeQuery, RunTimeKill and RunTimeDelete of the step name the same %b. Not a
# subdirectory of it: `runc run` removes its container's state directory when the container ends,
# and slurmstepd then removes config.json and %b itself (rmdir), which a left-over empty
# subdirectory would refuse (one directory left in the spool per step). A cancelled step leaves
# its %b, empty: slurmstepd's rmdir comes before the RunTimeDelete that removes runc's state.
RUNC_ROOT = "%b"
# The container's name: node, user, job, step, task (Slurm's examples): unique on a host that runs
# several slurmd.
CONTAINER_ID = "%n.%u.%j.%s.%t"
# How each series' slurmstepd runs a container step, where the patterns must differ (docs/containers.md).
# 22.05 passes the job's environment into the container, not the task's; it has one directory per step
# (%b) and leaves a cancelled step's cgroup directories and %b behind. 24.11 (24.11.5, run in a Debian
# 13 root on cgroup v1) passes the task's (CUDA_VISIBLE_DEVICES among it) and makes one directory per
# task (%b at run time, below the step's %m); at the step's end it names only the step's (%m: %b is then
# the user's bundle, %t -1), and a cancelled step's container stays in the step's cgroups (rootless runc
# cannot make its own below them), which Slurm removes. A series not here is taken as 22.05.
TASK_ENVIRONMENT_INSIDE = frozenset({"24.11"})
TASK_DIRECTORIES = frozenset({"24.11"})

# RunTimeRun's first program on compute hosts (roles/slurmd/files/cluster-cli-oci-run, installed by
# roles/slurmd where containers are on): it fits the step's copy of config.json to the node (that
# node's GPU device files, whatever the bundle's maker had; CUDA_VISIBLE_DEVICES, which Slurm 22.05
# does not pass into the container), then execs the runtime.
OCI_RUN_PROGRAM = "/usr/local/bin/cluster-cli-oci-run"


def target_series(inventory: Inventory) -> str:
    """The series ``slurm.version`` pins; the default (Debian 12's) where it pins none or one without
    facts here."""
    try:
        return series(inventory.slurm.version or DEFAULT_SERIES)
    except UnknownSlurmVersion:
        return DEFAULT_SERIES


def container_packages(inventory: Inventory) -> list[str]:
    """The Debian packages compute and login hosts get for containers (none with containers off)."""
    containers = inventory.containers
    return list(RUNTIME_PACKAGES[containers.runtime]) if containers.enabled else []


def as_the_user(command: str) -> str:
    """``command`` run as the job's user even where slurmstepd runs it as root: Slurm 22.05 runs
    RunTimeQuery, RunTimeKill and RunTimeDelete at the step's end as root (uid 0, seen on the local
    cluster), and runc would then act as root on a state the job's user wrote (a state.json naming any
    process or cgroup). setpriv (util-linux) drops to the user first; as the user it runs as it is.
    No double quotes: Slurm's parser ends the value at one."""
    return f"[ $(id -u) != 0 ] || exec {_setpriv(command)}; exec {command}"


def _setpriv(command: str) -> str:
    return f"setpriv --reuid=%u --regid=$(id -g %u) --init-groups {command}"


# What RunTimeDelete clears after runc's delete where slurmstepd runs it as root. A cancelled step's
# container still runs when slurmstepd removes the step's cgroups on cgroup v1: runc's cgroup below
# the step's keeps them, and slurmstepd gives up, leaving the step's, the job's and the user's
# directories (Debian's build: slurm_<node>/uid_<uid>/job_<job>/step_<step>, task_<n> in some
# controllers) and the step's %b (its rmdir comes first too). A later job of the same id on the node
# then fails to set its cpuset ("Device or resource busy"). Once runc's delete removed its cgroup and
# its state they are empty: rmdir removes nothing else, each directory on its own (deepest first).
# No '%' beyond Slurm's own patterns: Slurm refuses any other character after one.
LEFTOVER_CLEANUP = (
    "for job in /sys/fs/cgroup/*/slurm_%n/uid_$(id -u %u)/job_%j; do "
    "rmdir $job/step_%s/task_* $job/step_%s $job $(dirname $job) 2>/dev/null; done; rmdir %b 2>/dev/null"
)


def delete_as_the_user(command: str) -> str:
    """RunTimeDelete: ``command`` as the job's user (as_the_user), then, where slurmstepd runs it as
    root, LEFTOVER_CLEANUP; the delete's exit status is kept."""
    return (f"[ $(id -u) != 0 ] || {{ {_setpriv(command)}; status=$?; {LEFTOVER_CLEANUP}; exit $status; }}; "
            f"exec {command}")


def container_images(inventory: Inventory, roles: frozenset[str]) -> list[str]:
    """The image a probe of a host with ``roles`` looks for: ``containers.image`` on compute hosts,
    where steps run in it (the smoke check makes its bundle there)."""
    containers = inventory.containers
    return [containers.image] if containers.enabled and containers.image and "compute" in roles else []


def missing_image_note(where: str, image: str, hosts: list[str]) -> str:
    """plan's note for an image compute hosts do not hold; ``where``: the field's file:line. A note,
    not a refusal: the image is made from the training environment a deploy installs
    (training/container_image.py), so a first deploy comes before it."""
    return (f"{where}: containers.image {image} is not a root filesystem (no bin/) on {', '.join(hosts)}: "
            "container jobs and the smoke check `container` need it there; make it with "
            "training/container_image.py (docs/containers.md)")


def oci_run(gres_conf: str, gpu_env: bool) -> str:
    """The start of RunTimeRun: cluster-cli-oci-run for the step's directory (%b) and node (%n), with
    the gres.conf that node's slurmd reads; ``gpu_env`` where Slurm gives a task local GPU indices
    (task/cgroup with ConstrainDevices=yes), the only setting in which the program can work out the
    task's CUDA_VISIBLE_DEVICES."""
    return f"{OCI_RUN_PROGRAM} --bundle %b --node %n --gres-conf {gres_conf}{' --gpu-env' if gpu_env else ''} --"


def oci_conf_defaults(runtime: str, start: str, series: str) -> dict[str, str]:
    """oci.conf's RunTime* patterns for ``runtime`` on Slurm ``series``: `run` (Slurm's
    recommendation: no polling) after ``start`` (oci_run), and the state, kill and delete commands
    Slurm runs at the step's end (they end a cancelled step's container where its processes are in a
    cgroup runc made below the step's, which Slurm's process tracking does not signal), all rootless
    and all as the job's user. On 22.05 the delete then clears a cancelled step's leftovers; on a
    series with a directory per task (TASK_DIRECTORIES) the three run cluster-cli-oci-run over every
    task's containers in the step's directory (%m), as that is all the series names then."""
    command = f"{runtime} --rootless=true --root={RUNC_ROOT}"
    run = {"RunTimeRun": f"{start} {command} run {CONTAINER_ID} -b %b"}
    if series in TASK_DIRECTORIES:
        over_tasks = f"{OCI_RUN_PROGRAM} --step-dir %m --end {{}} -- {runtime} --rootless=true"
        return run | {key: as_the_user(over_tasks.format(operation)) for key, operation in
                      (("RunTimeQuery", "state"), ("RunTimeKill", "kill"), ("RunTimeDelete", "delete"))}
    return run | {
        "RunTimeQuery": as_the_user(f"{command} state {CONTAINER_ID}"),
        "RunTimeKill": as_the_user(f"{command} kill -a {CONTAINER_ID}"),
        "RunTimeDelete": delete_as_the_user(f"{command} delete --force {CONTAINER_ID}"),
    }


def oci_conf_keys(series: str) -> frozenset[str] | None:
    """The keys ``series``' oci.conf(5) documents; None: a series without a list here (not checked)."""
    return OCI_CONF_KEYS.get(series)
