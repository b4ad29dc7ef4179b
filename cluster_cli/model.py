"""The typed inventory: one YAML file describes the whole cluster.

Every class forbids unknown keys so that a typo is an error, never a silently ignored setting.
Field descriptions are the inventory reference: docs/inventory.md is generated from them.
"""

# No `from __future__ import annotations` here: pydantic would compile each of the model's 138
# annotations from its text at every start-up (3 ms of the 10,000-node render's 0.3 s).
import re
import typing
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from cluster_cli import hostlist
from cluster_cli.alert_windows import check_alert_name, check_duration

NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$"
CLUSTER_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,39}$"
APT_SUITE_PATTERN = r"^[A-Za-z0-9._~+/-]+$"
APT_COMPONENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+/-]*$"
SLURM_KEY_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9]*")  # used with fullmatch
MAX_NAME_LENGTH = 63  # a host name label, as `hostname -s` prints it

Name = Annotated[str, Field(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH)]
Port = Annotated[int, Field(ge=1, le=65535)]


def new_list() -> list[Any]:
    """An empty list: a default_factory written in Python, whose signature pydantic reads at once
    (``list``'s is parsed from its text at every field: 0.1-0.3 ms each, at every start-up)."""
    return []


def new_dict() -> dict[Any, Any]:
    """An empty dict, as ``new_list``."""
    return {}


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


def field_error(
    model: type[BaseModel], location: tuple[str, ...], message: str, value: Any
) -> ValidationError:
    """A validation error at ``location`` inside ``model``, for checks across fields: raised from a
    model validator, it gets the model's own location put in front by pydantic, so the loader
    reports the line and name of the field itself rather than those of the whole section."""
    return field_errors(model, [(location, message, value)])


def field_errors(model: type[BaseModel], errors: list[tuple[tuple[str, ...], str, Any]]) -> ValidationError:
    """Several errors of a cross-field check at once, each as ``(location, message, value)``."""
    return ValidationError.from_exception_data(
        model.__name__,
        [
            InitErrorDetails(type=PydanticCustomError("value_error", message), loc=location, input=value)
            for location, message, value in errors
        ],
    )


def _check_config_text(value: str) -> str:
    """A value written unquoted into a Slurm config file: white space ends it, '#' starts a
    comment and a line break starts a new setting, so none of them can be part of it. (Every white
    space character but the ASCII space is one str.isprintable refuses: a check of the whole string
    at once, 1,000 values of a 10,000-node inventory, not one of each character.)"""
    if not value.isprintable() or " " in value or "#" in value:
        raise ValueError(f"{value!r}: a Slurm config value cannot hold white space, '#' or control characters")
    return value


ConfigText = Annotated[str, AfterValidator(_check_config_text)]

# Slurm's time limits (sbatch(1) --time, slurm.conf(5) MaxTime): minutes, minutes:seconds,
# hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds.
SLURM_TIME_PATTERN = re.compile(r"\d+(:\d+){0,2}|\d+-\d+(:\d+){0,2}")
SLURM_TIME_WORDS = frozenset({"INFINITE", "UNLIMITED"})
SLURM_TIME_FORMATS = "MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, INFINITE or UNLIMITED"


def is_slurm_time(value: str) -> bool:
    return value.upper() in SLURM_TIME_WORDS or SLURM_TIME_PATTERN.fullmatch(value) is not None


def _check_slurm_time(value: str) -> str:
    if not is_slurm_time(value):
        raise ValueError(f"{value!r} is not a Slurm time: {SLURM_TIME_FORMATS}")
    return value


SlurmTime = Annotated[ConfigText, AfterValidator(_check_slurm_time)]


# Directories the deploy creates and chowns on the hosts (or teardown --purge deletes), and the
# secrets directory it makes 0700 on the control node, may not be one of these: a chown or a
# purge there would break the machine. Their subdirectories are fine (/var/lib/slurm).
SYSTEM_DIRS = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/media", "/mnt",
        "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin",
        "/usr/include", "/usr/lib", "/usr/lib64", "/usr/libexec", "/usr/local", "/usr/local/bin",
        "/usr/local/lib", "/usr/local/sbin", "/usr/sbin", "/usr/share", "/usr/src", "/var",
        "/var/backups", "/var/cache", "/var/lib", "/var/local", "/var/lock", "/var/log", "/var/mail",
        "/var/opt", "/var/run", "/var/spool", "/var/tmp", "/etc/systemd", "/etc/default", "/run/user",
        "/var/lib/mysql", "/etc/ssh", "/etc/munge", "/var/lib/munge",
    }
)


def _check_absolute_path(value: str) -> str:
    """An absolute path, one word, without '.' or '..' parts (``/var/lib/../../etc``)."""
    _check_word(value)
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not an absolute path")
    if {".", ".."} & set(value.split("/")):
        raise ValueError(f"{value!r}: a path cannot hold '.' or '..' parts")
    return value


def _check_owned_dir(value: str) -> str:
    """A directory of the cluster's own, where the deploy may chown and a purge may delete."""
    _check_config_text(value)
    _check_absolute_path(value)
    if ("/" + "/".join(part for part in value.split("/") if part)) in SYSTEM_DIRS:
        raise ValueError(
            f"{value!r} is a system directory: the deploy would take it over (chown) and teardown "
            "--purge would delete it; use a directory of its own below it"
        )
    return value


def _check_control_dir(value: str) -> str:
    """A directory on the control node: absolute, or below the home directory (``~/...``)."""
    below_home = value.startswith("~/") and value.strip("~/")
    _check_owned_dir(value[1:] if below_home else value)  # "~/x" is checked as "/x"
    return value


def _check_control_file(value: str) -> str:
    _check_absolute_path(value[1:] if value.startswith("~/") else value)
    return value


AbsolutePath = Annotated[str, AfterValidator(_check_absolute_path)]
OwnedDir = Annotated[str, AfterValidator(_check_owned_dir)]
ControlDir = Annotated[str, AfterValidator(_check_control_dir)]
ControlFile = Annotated[str, AfterValidator(_check_control_file)]


def _check_address(value: str) -> str:
    _check_config_text(value)
    if any(char in value for char in ",()[]="):
        raise ValueError(f"{value!r}: an address cannot hold ',', '(', ')', '[', ']' or '='")
    return value


Address = Annotated[str, Field(min_length=1), AfterValidator(_check_address)]


def _check_hostlist(value: str) -> str:
    try:
        hostlist.expand(value)
    except hostlist.HostlistError as error:
        raise ValueError(str(error)) from None
    return _check_config_text(value)


HostlistExpression = Annotated[str, Field(min_length=1), AfterValidator(_check_hostlist)]


def _check_override_key(key: str) -> str:
    if not SLURM_KEY_PATTERN.fullmatch(key):
        raise ValueError(f"{key!r} is not a configuration key (letters and digits, e.g. KillWait)")
    return key


def _check_override_value(item: Any) -> Any:
    if isinstance(item, (dict, list)):
        # pydantic turns ValueError (not TypeError) into a validation error with a location
        raise ValueError("value must be a scalar (string, number, yes/no) or null to delete")  # noqa: TRY004
    if isinstance(item, str):
        _check_config_text(item)
    return item


# Checked key by key, so every bad key is reported at its own line.
Overrides = dict[
    Annotated[str, AfterValidator(_check_override_key)], Annotated[Any, AfterValidator(_check_override_value)]
]


class SshSettings(StrictModel):
    """How Ansible reaches hosts over SSH."""

    user: str = Field("root", description="SSH login user (needs root or passwordless sudo).")
    port: Port = Field(22, description="SSH port.")
    private_key: ControlFile | None = Field(
        None, description="Private key file on the control node: an absolute path or `~/...`."
    )
    common_args: str | None = Field(
        None, description="Extra ssh arguments, e.g. a ProxyCommand to reach hosts behind a jump host."
    )


class Host(StrictModel):
    """A machine Ansible manages. Compute nodes of multi-host groups need no entry here."""

    name: Name = Field(description="Short hostname of the machine, as `hostname -s` prints it.")
    address: Address | None = Field(None, description="Address Ansible and Slurm use; defaults to the name.")
    connection: Literal["ssh", "local"] = Field(
        "ssh", description="`local` runs Ansible on this machine without SSH."
    )
    ssh: SshSettings | None = Field(None, description="Overrides the top-level `ssh` settings.")
    python: AbsolutePath = Field("/usr/bin/python3", description="Python interpreter Ansible uses on the host.")


class Controllers(StrictModel):
    """The slurmctld hosts."""

    primary: Name = Field(description="Host running the primary slurmctld.")
    backup: Name | None = Field(None, description="Host running the backup slurmctld (HA).")
    port: Port = Field(6817, description="SlurmctldPort.")


# ---- Slurm accounting data: accounts, users' associations, QoS (docs/operations.md#teams-accounts-fair-share-and-preemption)
# sacctmgr stores account and QoS names in lower case (a `Team-A` would differ from what it reads
# back on every deploy), and Linux and Slurm both refuse a user name outside useradd's default.
SLURM_ENTITY_PATTERN = r"^[a-z0-9_][a-z0-9_.-]{0,63}$"
USER_NAME_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"
# A TRES as sacctmgr names it in a limit: cpu, mem, node, billing, energy, gres/gpu, gres/gpu:TYPE,
# license/NAME (which ones this cluster tracks is checked in resolve/accounting.py).
TRES_NAME_PATTERN = re.compile(r"[a-z]+(/[a-z0-9_.-]+(:[a-z0-9_.-]+)?)?")
# a count, or for mem a size with Slurm's unit letter (64G)
TRES_COUNT_PATTERN = re.compile(r"\d+[KMGTP]?")

SlurmEntityName = Annotated[str, Field(pattern=SLURM_ENTITY_PATTERN)]
UserName = Annotated[str, Field(pattern=USER_NAME_PATTERN)]


def _check_tres_name(value: str) -> str:
    if not TRES_NAME_PATTERN.fullmatch(value):
        raise ValueError(f"{value!r} is not a TRES name (cpu, mem, node, billing, gres/gpu, gres/gpu:TYPE ...)")
    return value


def _check_tres_count(value: Any) -> Any:
    if isinstance(value, bool) or not (
        (isinstance(value, int) and value >= 0) or (isinstance(value, str) and TRES_COUNT_PATTERN.fullmatch(value))
    ):
        raise ValueError(f"{value!r}: a TRES limit is a count >= 0 (mem: a size such as 64G)")
    return value


# {gres/gpu: 16, cpu: 256, mem: 1T}: checked entry by entry, each at its own line.
TresLimits = dict[Annotated[str, AfterValidator(_check_tres_name)], Annotated[Any, AfterValidator(_check_tres_count)]]


class AssociationLimits(StrictModel):
    """Limits of an account's or a user's association (sacctmgr's names in brackets). An account's
    limit holds for the account and all below it together (Grp*) or for each job and user below it
    that sets none of its own (Max*)."""

    grp_tres: TresLimits = Field(
        default_factory=new_dict, description="GrpTRES: all running jobs of the association and its children together, e.g. `{gres/gpu: 16}`."
    )
    max_tres_per_job: TresLimits = Field(default_factory=new_dict, description="MaxTRES: each job.")
    grp_jobs: int | None = Field(None, ge=0, description="GrpJobs: running jobs of the association and its children.")
    max_jobs: int | None = Field(None, ge=0, description="MaxJobs: running jobs of each user.")
    max_submit_jobs: int | None = Field(None, ge=0, description="MaxSubmitJobs: running and pending jobs of each user.")
    max_wall: SlurmTime | None = Field(None, description="MaxWall: each job's time limit, in MaxTime's formats.")


class QosLimits(StrictModel):
    """Limits of a QoS (sacctmgr's names in brackets): they hold for every job in it, whatever its account."""

    max_tres_per_user: TresLimits = Field(
        default_factory=new_dict, description="MaxTRESPerUser: each user's running jobs together, e.g. `{gres/gpu: 8}`."
    )
    max_tres_per_job: TresLimits = Field(default_factory=new_dict, description="MaxTRESPerJob: each job.")
    grp_tres: TresLimits = Field(default_factory=new_dict, description="GrpTRES: all running jobs of the QoS together.")
    max_jobs_per_user: int | None = Field(None, ge=0, description="MaxJobsPerUser: running jobs of each user.")
    max_submit_jobs_per_user: int | None = Field(
        None, ge=0, description="MaxSubmitJobsPerUser: running and pending jobs of each user."
    )
    max_wall: SlurmTime | None = Field(None, description="MaxWall: each job's time limit, in MaxTime's formats.")


QosFlag = Literal[
    "DenyOnLimit", "EnforceUsageThreshold", "NoDecay", "NoReserve", "OverPartQOS", "PartitionMaxNodes",
    "PartitionMinNodes", "PartitionTimeLimit", "RequiresReservation", "UsageFactorSafe",
]


class Qos(StrictModel):
    """A QoS: a job's priority boost, what it may preempt, and limits."""

    name: SlurmEntityName = Field(description="QoS name (lower case: sacctmgr stores it so).")
    description: ConfigText | None = Field(None, description="Description; default the name.")
    priority: int = Field(0, ge=0, description="Priority: its part of a job's priority (times `priority.weights.qos`).")
    preempt: list[SlurmEntityName] = Field(
        default_factory=new_list, description="Preempt: the QoS whose jobs a job of this one may preempt (each defined here)."
    )
    preempt_mode: Literal["cluster", "cancel", "requeue", "suspend"] = Field(
        "cluster",
        description=(
            "PreemptMode of the jobs of this QoS when they are preempted; `cluster` takes `priority.preemption.mode`."
        ),
    )
    grace_time_s: int | None = Field(
        None,
        ge=0,
        description=(
            "GraceTime, seconds a preempted job of this QoS has between its signal and its end; "
            "default `priority.preemption.grace_time_s`."
        ),
    )
    usage_factor: float | None = Field(None, ge=0, description="UsageFactor: how much its jobs' usage counts for fair share (default 1).")
    flags: list[QosFlag] = Field(
        default_factory=new_list, description="Flags, e.g. `[DenyOnLimit]` (refuse a job over a limit at submission)."
    )
    limits: QosLimits = Field(default_factory=QosLimits, description="Its limits.")


class SlurmAccount(StrictModel):
    """A Slurm account: an organisation or a team, in a tree below `root`."""

    name: SlurmEntityName = Field(description="Account name (lower case: sacctmgr stores it so).")
    parent: SlurmEntityName = Field("root", description="Parent account: `root` or another account here.")
    description: ConfigText | None = Field(None, description="Description; default the name.")
    organization: ConfigText | None = Field(None, description="Organization; default the parent's name.")
    shares: int = Field(
        1, ge=1, description="Fairshare: its share of the parent's, relative to its siblings' (>= 1)."
    )
    default_qos: SlurmEntityName | None = Field(
        None, description="DefaultQOS of its jobs (one of `qos`, or of the QoS list when `qos` is empty)."
    )
    qos: list[SlurmEntityName] = Field(
        default_factory=new_list, description="The QoS its users may ask for; empty: Slurm's inherited set (`normal`)."
    )
    limits: AssociationLimits = Field(default_factory=AssociationLimits, description="Its limits.")


class SlurmUser(StrictModel):
    """A user's Slurm side: the accounts it may charge, its shares and limits."""

    name: UserName = Field(description="Login name (as Linux and Slurm accept it: lower case, at most 32).")
    account: SlurmEntityName | None = Field(
        None, description="Default account; default `accounting.account`."
    )
    accounts: list[SlurmEntityName] = Field(
        default_factory=new_list, description="Further accounts it may charge with `--account`."
    )
    uid: int | None = Field(
        None,
        ge=1000,
        le=2**31 - 2,
        description=(
            "The user's UID: checked here (unique, not a system or daemon id, the same as `people.users`' "
            "where the user is there too, which is what makes the Linux account on every host)."
        ),
    )
    shares: int = Field(1, ge=1, description="Fairshare of the user within each of its accounts (>= 1).")
    default_qos: SlurmEntityName | None = Field(None, description="DefaultQOS of its jobs; default its account's.")
    qos: list[SlurmEntityName] = Field(default_factory=new_list, description="QoS it may use; empty: its account's.")
    limits: AssociationLimits = Field(default_factory=AssociationLimits, description="Its limits in each of its accounts.")


def _user_entry(value: Any) -> Any:
    """`users: [alice]` is `users: [{name: alice}]`."""
    return {"name": value} if isinstance(value, str) else value


class PriorityWeights(StrictModel):
    """PriorityWeight*: how much each factor (0..1) adds to a job's priority."""

    fairshare: int = Field(100000, ge=0, description="PriorityWeightFairshare: the under-served account first.")
    qos: int = Field(10000, ge=0, description="PriorityWeightQOS: a QoS's priority.")
    age: int = Field(1000, ge=0, description="PriorityWeightAge: time waited, full at `max_age`.")
    partition: int = Field(1000, ge=0, description="PriorityWeightPartition: a partition's PriorityJobFactor.")
    job_size: int = Field(0, ge=0, description="PriorityWeightJobSize: large jobs first (0: size does not count).")


class Preemption(StrictModel):
    """Preemption between QoS (`PreemptType=preempt/qos`): a job of a QoS whose `preempt` names
    another may take that QoS's jobs' resources."""

    enabled: bool = Field(True, description="PreemptType=preempt/qos; false: preempt/none.")
    mode: Literal["requeue", "cancel"] = Field(
        "requeue",
        description="PreemptMode: `requeue` puts the preempted job back in the queue (it restarts from its checkpoint).",
    )
    grace_time_s: int = Field(
        300,
        ge=0,
        description=(
            "GraceTime of every QoS that sets none: seconds between the preemption signal and the job's end, "
            "for a checkpoint to be written."
        ),
    )
    send_user_signal: bool = Field(
        True,
        description=(
            "Send the job's own `--signal` at preemption (SlurmctldParameters=preempt_send_user_signal in 22.05, "
            "PreemptParameters=send_user_signal later); a job without one gets SIGTERM."
        ),
    )


class Priority(StrictModel):
    """Job priority and preemption: slurm.conf's Priority* and Preempt* keys and each partition's
    TRESBillingWeights, rendered from here (docs/operations.md#teams-accounts-fair-share-and-preemption says why)."""

    type: Literal["multifactor", "basic"] = Field(
        "multifactor", description="PriorityType: `multifactor` (fair share, QoS, age ...) or `basic` (first come)."
    )
    weights: PriorityWeights = Field(default_factory=PriorityWeights, description="The factors' weights.")
    decay_half_life: SlurmTime = Field(
        "7-0", description="PriorityDecayHalfLife: past usage counts half after this long."
    )
    max_age: SlurmTime = Field("7-0", description="PriorityMaxAge: waiting longer adds no more age factor.")
    bill_gpus: bool = Field(
        True,
        description=(
            "TRESBillingWeights on each partition with GPUs so that a job is billed in GPUs: GRES/gpu=1, and "
            "CPU such that a node's CPUs cost as much as its GPUs, with PriorityFlags=MAX_TRES (a job is billed "
            "for the larger); a partition's own `options.TRESBillingWeights` wins."
        ),
    )
    preemption: Preemption = Field(default_factory=Preemption, description="Preemption between QoS.")


class Accounting(StrictModel):
    """slurmdbd and its MariaDB database."""

    enabled: bool = Field(True, description="Run slurmdbd with MariaDB and record jobs for sacct.")
    host: Name | None = Field(None, description="Host running slurmdbd and MariaDB (required when enabled).")
    port: Port = Field(6819, description="DbdPort.")
    database: Name = Field("slurm_acct_db", description="MariaDB database name (StorageLoc).")
    database_user: Name = Field("slurm", description="MariaDB user slurmdbd connects as (StorageUser).")
    account: SlurmEntityName = Field(
        "default", description="Slurm account of the users that name none (and of the smoke test user)."
    )
    users: list[Annotated[SlurmUser, BeforeValidator(_user_entry, json_schema_input_type=UserName | SlurmUser)]] = Field(
        default_factory=new_list,
        description="Users with an association: a name (in `account`) or a user's accounts, shares and limits.",
    )
    accounts: list[SlurmAccount] = Field(
        default_factory=new_list,
        description="Accounts as a tree (parent, shares, QoS, limits); `account` is added below root when not here.",
    )
    qos: list[Qos] = Field(
        default_factory=new_list, description="QoS (priority, preemption, limits); Slurm's own `normal` always stays."
    )


# YAML 1.1 reads unquoted off, no and yes as booleans: take them back as the words that were written.
def _off_word(value: Any) -> Any:
    return "off" if value is False else value


def _yes_no_word(value: Any) -> Any:
    if isinstance(value, bool):
        return "YES" if value else "NO"
    return value


class Gpus(StrictModel):
    """GPUs of every node in a group."""

    count: int = Field(ge=1, le=64, description="GPUs per node.")
    type: Name | None = Field(None, description="GPU type, e.g. h100; becomes `Gres=gpu:TYPE:COUNT`.")
    autodetect: Annotated[
        Literal["off", "nvml"], BeforeValidator(_off_word), WithJsonSchema({"enum": ["off", "nvml", False]})
    ] = Field(
        "off", description="`nvml` writes `AutoDetect=nvml` (needs Slurm built with NVML)."
    )
    devices: HostlistExpression | None = Field(
        None,
        description=(
            "Device files as a hostlist, e.g. `/dev/nvidia[0-7]`, `count` per node; in single-host "
            "groups the files of all the group's nodes, in node order. Required unless autodetect is nvml."
        ),
    )
    fake: bool = Field(
        False,
        description=(
            "Test only: create the device files as character devices (major 195, minor = index "
            "in `devices`) on hosts without GPUs."
        ),
    )


class NodeGroup(StrictModel):
    """Compute nodes with the same hardware."""

    name: Name = Field(description="Group name; partitions may refer to it.")
    nodes: HostlistExpression = Field(description="Node names as a hostlist, e.g. `gpu[001-128]`.")
    host: Name | None = Field(
        None,
        description=(
            "Single-host mode: every node of the group is a slurmd instance (`slurmd -N NAME`) "
            "on this one host. Without it every node is a host of its own."
        ),
    )
    base_port: Port | None = Field(
        None, description="Single-host mode: the first node listens on this port, the next on +1..."
    )
    addresses: HostlistExpression | None = Field(
        None, description="Multi-host: addresses in node order, e.g. `10.1.0.[11-138]`; default the names."
    )
    sockets: int = Field(1, ge=1, le=64, description="Sockets per node.")
    cores_per_socket: int = Field(ge=1, le=1024, description="Cores per socket.")
    threads_per_core: int = Field(1, ge=1, le=8, description="Hardware threads per core.")
    cpus: int | None = Field(
        None, ge=1, description="CPUs Slurm schedules; default sockets x cores x threads."
    )
    real_memory_mb: int = Field(
        ge=1, description="RealMemory in MiB: a little under physical (~0.95x) so nodes do not drain."
    )
    gpus: Gpus | None = Field(None, description="GPUs per node; omit for CPU-only nodes.")
    features: list[Name] = Field(default_factory=new_list, description="Node features (constraints).")
    weight: int | None = Field(None, ge=0, description="Scheduling weight; lower is used first.")


class Partition(StrictModel):
    """A Slurm partition."""

    name: Name = Field(description="PartitionName.")
    nodes: list[str] = Field(min_length=1, description="Group names and/or hostlists of nodes.")
    default: bool = Field(False, description="The default partition (exactly one).")
    max_time: SlurmTime = Field(
        "INFINITE",
        description=(
            "MaxTime: minutes, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS` (e.g. `1-00:00:00`), "
            "INFINITE or UNLIMITED."
        ),
    )
    default_time: SlurmTime | None = Field(None, description="DefaultTime, in MaxTime's formats.")
    oversubscribe: Annotated[
        Literal["NO", "YES", "EXCLUSIVE", "FORCE"] | None,
        BeforeValidator(_yes_no_word),
        WithJsonSchema({"enum": ["NO", "YES", "EXCLUSIVE", "FORCE", False, True, None]}),
    ] = Field(
        None, description="OverSubscribe."
    )
    qos: Name | None = Field(None, description="QOS attached to the partition.")
    options: Overrides = Field(default_factory=new_dict, description="Any other partition keys.")


class Switch(StrictModel):
    """A switch of a tree topology: either a leaf (`nodes`) or a parent (`switches`)."""

    name: Name = Field(description="SwitchName.")
    nodes: HostlistExpression | None = Field(None, description="Nodes on this leaf switch.")
    switches: HostlistExpression | None = Field(None, description="Child switches, as a hostlist.")
    link_speed: int | None = Field(None, ge=1, description="LinkSpeed (relative).")


class Block(StrictModel):
    """A block of topology/block."""

    name: Name = Field(description="BlockName.")
    nodes: HostlistExpression = Field(description="Nodes in this block.")


class Topology(StrictModel):
    """The fabric, written to topology.conf so jobs pack onto the fewest switches."""

    plugin: Literal["tree", "block"] = Field(description="topology/tree or topology/block.")
    switches: list[Switch] = Field(default_factory=new_list, description="Tree: leaf and spine switches.")
    blocks: list[Block] = Field(default_factory=new_list, description="Block: the blocks.")
    block_sizes: list[int] | None = Field(None, description="Block: BlockSizes.")


class Cgroup(StrictModel):
    """cgroup.conf."""

    version: Literal["auto", "v1", "v2"] = Field(
        "auto", description="`auto` lets slurmd detect the hierarchy (`CgroupPlugin=autodetect`)."
    )
    overrides: Overrides = Field(
        default_factory=new_dict, description="cgroup.conf keys over the defaults; null deletes a default."
    )


class SlurmPaths(StrictModel):
    """Where Slurm keeps its files on every host."""

    conf_dir: OwnedDir = Field(
        "/etc/slurm", description="slurm.conf, gres.conf, cgroup.conf, topology.conf, slurmdbd.conf."
    )
    state_dir: OwnedDir = Field("/var/lib/slurm/slurmctld", description="StateSaveLocation of slurmctld.")
    spool_dir: OwnedDir = Field(
        "/var/lib/slurm/slurmd", description="SlurmdSpoolDir is `SPOOL_DIR/%n`, one per node."
    )
    log_dir: OwnedDir = Field("/var/log/slurm", description="slurmctld.log, slurmd-NODE.log, slurmdbd.log.")
    run_dir: OwnedDir = Field("/run/slurm", description="Pid files of the daemons.")


class SlurmBuild(StrictModel):
    """Slurm's NVML plugin built from the distribution's source package of the version the cluster
    runs (for GPU autodetection: Debian's packages have no NVML plugin)."""

    nvml: bool = Field(True, description="Build the gpu/nvml plugin (needs the NVML headers, non-free).")
    host: Name | None = Field(
        None,
        description=(
            "Host that builds the NVML plugin (`nvml_plugin: build`): an inventory host, or `localhost` for "
            "the control node (Debian of the cluster's release and architecture, reached as root or with "
            "sudo); default the primary controller. It needs Debian's source and non-free archives and the "
            "build tools (build-essential, dpkg-dev); the result is cached there and in BUILD_DIR/slurm-build."
        ),
    )


class Slurm(StrictModel):
    """Slurm itself."""

    build: SlurmBuild = Field(
        default_factory=SlurmBuild,
        description="How the NVML plugin is built (`nvml_plugin: build`).",
    )
    nvml_plugin: Literal["build", "apt"] = Field(
        "build",
        description=(
            "Where the hosts of node groups with `gpus.autodetect: nvml` get Slurm's gpu/nvml plugin "
            "(`slurm-wlm-nvml-plugin`; Debian's packages have none): `build` makes it once per cluster "
            "from Debian's source of the Slurm version the cluster runs (see `build`; cached, reused on "
            "re-deploy), `apt` installs it from the hosts' apt sources (`package_mirror`, e.g. a "
            "`cluster-cli bundle`, or a site repository). Hosts without such groups never get it."
        ),
    )
    version: str | None = Field(
        None, description="Pin the distribution package version (e.g. `22.05.8-4+deb12u3`)."
    )
    user: Name = Field("slurm", description="SlurmUser.")
    uid: int = Field(64030, ge=1, le=2**31 - 1, description="UID of SlurmUser, identical on every host.")
    gid: int = Field(64030, ge=1, le=2**31 - 1, description="GID of SlurmUser's group.")
    slurmd_port: Port = Field(6818, description="SlurmdPort of multi-host nodes.")
    configless: bool = Field(
        False,
        description=(
            "Configless mode: slurm.conf gets `SlurmctldParameters=enable_configless` and every slurmd "
            "is started with `--conf-server` (both controllers under HA), fetching slurm.conf, gres.conf, "
            "cgroup.conf and topology.conf from slurmctld into its spool directory's `conf-cache`. Hosts "
            "that only run slurmd get no configuration files (stale ones are removed); controllers, login "
            "hosts (Slurm 22.05 has no sackd) and the database host keep them. A change then reaches the "
            "slurmds through `scontrol reconfigure`, or a slurmd restart where it needs one, with no file "
            "pushed to those hosts. Needs Slurm 20.02 or newer."
        ),
    )
    paths: SlurmPaths = Field(
        default_factory=SlurmPaths, description="Config, state, spool, log and pid directories."
    )
    conf: Overrides = Field(
        default_factory=new_dict,
        description="slurm.conf keys over the expert defaults; null deletes a default key.",
    )


# ---- People: Linux users and groups, the same on every host (docs/operations.md#people-linux-users-and-groups)
SSH_KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
                 "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
SSH_KEY_DATA = re.compile(r"[A-Za-z0-9+/]+={0,3}")


def _check_ssh_key(value: str) -> str:
    """An OpenSSH public key line: TYPE BASE64 [COMMENT], no options (they would widen what the key may do)."""
    parts = value.split(" ", 2)
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES or not SSH_KEY_DATA.fullmatch(parts[1]) or not value.isprintable():
        raise ValueError(
            f"not an OpenSSH public key line (TYPE BASE64 [COMMENT], TYPE one of {', '.join(SSH_KEY_TYPES)}): {value[:40]!r}"
        )
    return value


SshPublicKey = Annotated[str, AfterValidator(_check_ssh_key)]
def _check_person_id(value: int) -> int:
    if value in (65534, 65535):
        raise ValueError(f"{value} is nobody's/nogroup's id (65534) or the 16-bit -1 (65535) on every host")
    return value


def _check_passwd_field(value: str) -> str:
    """A home or shell: /etc/passwd separates its fields with `:` and its lines with a newline."""
    if ":" in value or not value.isprintable():
        raise ValueError(f"{value!r}: /etc/passwd cannot hold a ':' or a control character")
    return value


# Below 1000: Debian's system accounts; 65534/65535: nobody and the 16-bit -1; from 2**31 - 1: what some tools read as -1.
PersonId = Annotated[int, Field(ge=1000, le=2**31 - 2), AfterValidator(_check_person_id)]
PasswdPath = Annotated[AbsolutePath, AfterValidator(_check_passwd_field)]


class PersonGroup(StrictModel):
    """A Linux group, the same GID on every host."""

    name: UserName = Field(description="Group name (as groupadd accepts it: lower case, at most 32).")
    gid: PersonId = Field(description="Its GID on every host (1000 or more).")


class Person(StrictModel):
    """A Linux user, made the same on every host: controllers, database, login and compute."""

    name: UserName = Field(description="Login name (as Linux and Slurm accept it: lower case, at most 32).")
    uid: PersonId = Field(description="Its UID on every host (1000 or more); an existing account with another fails the deploy.")
    gid: PersonId | None = Field(
        None,
        description=(
            "Primary group: the GID of one of `people.groups`, or of a group of the user's own name made for it; "
            "default: a group of its own name with GID = UID."
        ),
    )
    groups: list[UserName] = Field(
        default_factory=new_list,
        description="Supplementary groups, each one of `people.groups` (membership of those is kept to this list).",
    )
    shell: PasswdPath = Field("/bin/bash", description="Login shell.")
    home: PasswdPath | None = Field(
        None, description="Home directory, made with the user; default /home/NAME. A later change is not applied."
    )
    ssh_keys: list[SshPublicKey] = Field(
        default_factory=new_list,
        description="SSH public keys, kept in a block of its ~/.ssh/authorized_keys (its own lines there stay).",
    )
    state: Literal["present", "locked", "absent"] = Field(
        "present",
        description=(
            "`locked`: the account expires (`usermod --expiredate 1`: no login by password or SSH key) and keeps "
            "its files and its Slurm association; `absent`: deleted (userdel) where the deploy made it. A user "
            "taken out of the inventory is locked, never deleted."
        ),
    )
    remove_home: bool = Field(False, description="With `state: absent`: delete its home directory and mail spool too.")


LDAP_URI = re.compile(r"ldaps?://[A-Za-z0-9.\[\]:_-]+(:[0-9]{1,5})?/?")
LDAP_DN = re.compile(r"[A-Za-z][A-Za-z0-9-]*=[^,=]+(,[A-Za-z][A-Za-z0-9-]*=[^,=]+)*")


def _check_ldap_uri(value: str) -> str:
    if not LDAP_URI.fullmatch(value):
        raise ValueError(f"{value!r} is not an LDAP server's URI (ldap://HOST[:PORT] or ldaps://HOST[:PORT])")
    return value


def _check_ldap_dn(value: str) -> str:
    """A distinguished name written into sssd.conf: ATTR=VALUE pairs, no escapes, one line."""
    if not LDAP_DN.fullmatch(value) or not value.isprintable():
        raise ValueError(f"{value!r} is not a distinguished name (attr=value,attr=value, e.g. dc=example,dc=org)")
    return value


def _check_sssd_value(item: Any) -> Any:
    if isinstance(item, (dict, list)):
        raise ValueError("value must be a scalar (string, number, true/false) or null to delete")  # noqa: TRY004
    if isinstance(item, str) and not item.isprintable():
        raise ValueError(f"{item!r}: an sssd.conf value is one line, without control characters")
    return item


LdapUri = Annotated[str, AfterValidator(_check_ldap_uri)]
LdapDn = Annotated[str, AfterValidator(_check_ldap_dn)]
SssdOptions = dict[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")], Annotated[Any, AfterValidator(_check_sssd_value)]]


class Directory(StrictModel):
    """The site's LDAP directory, read by an SSSD client on every host (roles/sssd): its users and
    groups resolve the same everywhere, beside the inventory's own `people`."""

    uri: list[LdapUri] = Field(
        min_length=1, description="The LDAP servers, tried in order: `ldap://HOST[:PORT]` or `ldaps://HOST[:PORT]`."
    )
    base_dn: LdapDn = Field(description="Where users and groups are searched, e.g. `dc=example,dc=org`.")
    ldap_schema: Literal["rfc2307", "rfc2307bis"] = Field(
        "rfc2307",
        description="How groups name their members: `rfc2307` (memberUid) or `rfc2307bis` (member DNs).",
    )
    start_tls: bool = Field(
        True,
        description=(
            "StartTLS on `ldap://` URIs (`ldaps://` ones are TLS already); false sends the bind password in "
            "clear text and is refused unless `insecure: true`."
        ),
    )
    insecure: bool = Field(False, description="Allow an `ldap://` URI without StartTLS (a test directory only).")
    ca_file: ControlFile | None = Field(
        None,
        description=(
            "The CA certificate (PEM) the servers' certificates are checked against, a file on the control node "
            "copied to every host; required with TLS (the hosts' own CA bundle is not trusted for this)."
        ),
    )
    bind_dn: LdapDn | None = Field(None, description="The DN SSSD binds as; null: anonymous reads.")
    bind_password_file: ControlFile | None = Field(
        None,
        description=(
            "With `bind_dn`: a file on the control node holding the bind password (one line, mode 0600, "
            "owned by the deploying user); default `SECRETS_DIR/ldap_bind_password`. Its value reaches "
            "the hosts in a 0600 file and is never shown."
        ),
    )
    min_id: int = Field(
        10000, ge=1000, le=2**31 - 2, description="The directory's lowest UID/GID; lower ones are ignored (SSSD `min_id`)."
    )
    max_id: int = Field(
        2**31 - 2, ge=1000, le=2**31 - 2, description="Its highest UID/GID (SSSD `max_id`)."
    )
    options: SssdOptions = Field(
        default_factory=new_dict,
        description=(
            "Further keys of sssd.conf's domain section over the defaults (e.g. `ldap_access_filter`, "
            "`ldap_user_search_base`); null deletes a default. The keys set by the fields above are refused here."
        ),
    )


class People(StrictModel):
    """Linux users and groups, the same ids on every host (a cluster's jobs run under the submitter's
    UID on every node)."""

    groups: list[PersonGroup] = Field(default_factory=new_list, description="Groups, each with its GID.")
    users: list[Person] = Field(default_factory=new_list, description="Users, each with its UID.")
    directory: Directory | None = Field(
        None,
        description=(
            "An SSSD client of the site's LDAP directory on every host; `groups` and `users` above must "
            "stay outside its id range. Omit for none."
        ),
    )


class NodeAccess(StrictModel):
    """Who may log in to a compute host outside Slurm."""

    pam_slurm_adopt: bool = Field(
        True,
        description=(
            "pam_slurm_adopt on compute-only hosts that run one node: an SSH login lands in the "
            "user's running job there, or is refused."
        ),
    )
    admin_users: list[Name] = Field(
        default_factory=new_list, description="Users who may always log in; root and the SSH user always may."
    )
    admin_groups: list[Name] = Field(default_factory=new_list, description="Groups whose members may always log in.")


class Munge(StrictModel):
    """MUNGE authentication."""

    uid: int = Field(64031, ge=1, le=2**31 - 1, description="UID of the munge user, identical on every host.")
    gid: int = Field(64031, ge=1, le=2**31 - 1, description="GID of the munge group.")


def _check_nccl_name(key: str) -> str:
    if not re.fullmatch(r"NCCL_[A-Z0-9_]+", key):
        raise ValueError(f"{key!r} is not an NCCL variable (NCCL_...)")
    return key


def _check_nccl_value(value: str) -> str:
    # nccl.conf holds one KEY=VALUE per line
    if any(not char.isprintable() for char in value):
        raise ValueError(f"{value!r}: an NCCL value cannot hold line breaks or control characters")
    return value


NcclName = Annotated[str, AfterValidator(_check_nccl_name)]
NcclValue = Annotated[str, AfterValidator(_check_nccl_value)]


class Nccl(StrictModel):
    """NCCL settings for training jobs, written to /etc/nccl.conf."""

    env: dict[NcclName, NcclValue] = Field(
        default_factory=new_dict,
        description="NCCL variables, e.g. NCCL_SOCKET_IFNAME, NCCL_IB_HCA, NCCL_IB_DISABLE, NCCL_NET_GDR_LEVEL.",
    )


def _check_word(value: str) -> str:
    """A value written into an apt sources file or pip.conf, where white space separates values."""
    if not value:
        raise ValueError("must not be empty")
    for char in value:
        if char.isspace() or not char.isprintable():
            raise ValueError(f"{value!r}: cannot hold white space or control characters")
    return value


APT_URI_SCHEMES = ("file:/", "copy:/", "http://", "https://")


def _check_apt_uri(value: str) -> str:
    _check_word(value)
    if not value.startswith(APT_URI_SCHEMES):
        raise ValueError(
            f"{value!r} is not an apt repository URI (file:/PATH, http://HOST/PATH or https://HOST/PATH)"
        )
    return value


def _check_url(value: str) -> str:
    _check_word(value)
    if not value.startswith(("http://", "https://", "file:/")):
        raise ValueError(f"{value!r} is not a URL (http://, https:// or file:/)")
    return value


def _check_host_path(value: str) -> str:
    _check_word(value)
    if not value.startswith("/"):
        raise ValueError(f"{value!r} is not an absolute path")
    return value


def _check_path_or_url(value: str) -> str:
    _check_word(value)
    if not value.startswith(("/", "http://", "https://", "file:/")):
        raise ValueError(f"{value!r} is neither an absolute path nor a URL (http://, https:// or file:/)")
    return value


AptUri = Annotated[str, AfterValidator(_check_apt_uri)]
Url = Annotated[str, AfterValidator(_check_url)]
HostPath = Annotated[str, AfterValidator(_check_host_path)]
PathOrUrl = Annotated[str, AfterValidator(_check_path_or_url)]
AptSuite = Annotated[str, Field(pattern=APT_SUITE_PATTERN)]
AptComponent = Annotated[str, Field(pattern=APT_COMPONENT_PATTERN)]


class AptMirror(StrictModel):
    """One apt repository every cluster host installs its packages from, written to
    `/etc/apt/sources.list.d/cluster-mirror.sources` (deb822)."""

    uri: AptUri = Field(
        description=(
            "Repository URI: `file:/PATH` for a mirror mounted or copied onto every host, "
            "`http://HOST/PATH` or `https://HOST/PATH`."
        )
    )
    suites: list[AptSuite] = Field(
        default_factory=lambda: ["./"],
        min_length=1,
        description=(
            "Suites: `./` (or another path ending in `/`) for a flat repository without components, "
            "or suite names such as `[bookworm, bookworm-updates]` for a Debian-style mirror."
        ),
    )
    components: list[AptComponent] = Field(
        default_factory=new_list,
        description=(
            "Components, e.g. `[main, non-free-firmware]`: empty for a flat repository, "
            "at least one with suite names."
        ),
    )
    trusted: bool = Field(
        False, description="`Trusted: yes` ([trusted=yes]): use the repository without a valid signature."
    )
    signed_by: HostPath | None = Field(
        None,
        description=(
            "Key file on the hosts that signs the repository (Signed-By), e.g. "
            "`/usr/share/keyrings/mirror.gpg`; the deploy fails on a host that lacks it."
        ),
    )
    exclusive: bool = Field(
        True,
        description=(
            "Disable every other apt source on the hosts: `/etc/apt/sources.list` and the `*.list` and "
            "`*.sources` files of `sources.list.d` are renamed to `NAME.cluster-cli.disabled`. "
            "`false`, or removing the mirror, renames them back on the next deploy."
        ),
    )

    @model_validator(mode="after")
    def _flat_or_components(self) -> Self:
        flat = [suite.endswith("/") for suite in self.suites]
        if any(flat) and not all(flat):
            raise field_error(
                AptMirror,
                ("suites",),
                "flat paths (ending in '/') and suite names cannot be mixed in one repository",
                self.suites,
            )
        if all(flat) and self.components:
            raise field_error(
                AptMirror,
                ("components",),
                "must be empty for a flat repository (suites ending in '/', such as './')",
                self.components,
            )
        if not any(flat) and not self.components:
            raise field_error(
                AptMirror,
                ("components",),
                "at least one component (e.g. [main]) is needed with suite names; "
                "a flat repository has the suite './'",
                self.components,
            )
        return self


class PipMirror(StrictModel):
    """Where pip finds Python packages, written to `/etc/pip.conf` on every cluster host (the
    training environment's `pip install` reads it; `training.pip_args` still go on top)."""

    index_url: Url | None = Field(
        None,
        description="Package index used instead of PyPI (`index-url`), e.g. `http://mirror.internal/pypi/simple`.",
    )
    find_links: list[PathOrUrl] = Field(
        default_factory=new_list,
        description=(
            "Directories on the hosts or URLs pip also takes wheels from (`find-links`), e.g. `[/mirror/wheels]`."
        ),
    )
    no_index: bool = Field(False, description="Use no package index at all, only `find_links` (`no-index`).")

    @model_validator(mode="after")
    def _something_to_use(self) -> Self:
        if self.no_index and not self.find_links:
            raise field_error(
                PipMirror, ("no_index",), "needs find_links: pip would have nowhere to look", self.no_index
            )
        if self.no_index and self.index_url:
            raise field_error(
                PipMirror, ("index_url",), "is not used with no_index: true; remove one", self.index_url
            )
        if not self.index_url and not self.find_links:
            raise ValueError("set index_url or find_links (or remove the pip section)")
        return self


class PackageMirror(StrictModel):
    """Package sources for clusters without Internet access (air-gapped): the hosts install
    from these instead of their own apt sources and PyPI."""

    apt: AptMirror | None = Field(
        None, description="The apt repository; omit to keep the hosts' apt sources."
    )
    pip: PipMirror | None = Field(
        None, description="pip's index and wheel directories; omit for pip's defaults."
    )


class GpuThreshold(StrictModel):
    """Pass/fail floors for one GPU type."""

    allreduce_busbw_gbps: float | None = Field(
        None, gt=0, description="All-reduce bus bandwidth floor, GB/s."
    )
    matmul_bf16_tflops: float | None = Field(None, gt=0, description="bf16 dense matmul floor, TFLOP/s.")
    copy_tbps: float | None = Field(None, gt=0, description="Device memory copy floor, TB/s.")
    ddp_scaling_efficiency: float | None = Field(
        None, gt=0, le=1, description="DDP scaling efficiency floor, throughput_N / (N x throughput_1)."
    )


class Training(StrictModel):
    """The Python/PyTorch training environment and the smoke jobs."""

    python: AbsolutePath = Field("/usr/bin/python3", description="Interpreter the virtual environment is made from.")
    torch_version: Annotated[str, Field(pattern=r"^[0-9][0-9A-Za-z.+]*$")] | None = Field(
        "2.13.0",
        description=(
            "Pinned torch version; `null` for an environment without torch (e.g. a Python with no "
            "torch wheel), where the smoke suite's training checks skip."
        ),
    )
    ray_version: Annotated[str, Field(pattern=r"^[0-9][0-9A-Za-z.+]*$")] | None = Field(
        None,
        description=(
            "Pinned Ray version (`pip install ray==<this>`, the core without the dashboard's extras), "
            "installed into the environment beside torch; `null`: no Ray (its wheel is large). With it, "
            "the job templates include `ray.sbatch`: a Ray cluster over a job's nodes."
        ),
    )
    venv_path: OwnedDir = Field("/opt/cluster-training/venv", description="Virtual environment every node sees.")
    packages: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+==[0-9A-Za-z.+!-]+$")]] = Field(
        default_factory=lambda: ["numpy==2.4.6"],
        description="Exact pins (name==version) installed beside torch; torch.distributed needs numpy.",
    )
    pip_args: list[str] = Field(
        default_factory=new_list,
        description=(
            "Extra arguments of the environment's `pip install`, e.g. "
            "`[--no-index, --find-links=/mirror/wheels]`; they go on top of `package_mirror.pip`."
        ),
    )
    work_dir: OwnedDir = Field(
        "/srv/cluster-training",
        description=(
            "Directory for smoke job files and the training checks' checkpoints, shared at the same path by "
            "every host; the deploy creates it where it is missing, owned by `test_user`, mode 0755. Unset, "
            "with `storage.nfs_server` exporting and mounting `/shared`: `/shared/cluster-training`, made "
            "on the server."
        ),
    )
    examples_dir: OwnedDir = Field(
        "/opt/cluster-training/examples",
        description=(
            "Where every login host gets the job templates (training/examples, rendered for this cluster's "
            "training partition and GPUs) and the user guide, for users to copy."
        ),
    )
    test_user: Name = Field(
        "smoke",
        description=(
            "Unprivileged user the smoke jobs run as; the deploy creates it (with a home directory) "
            "on every compute and login host."
        ),
    )
    test_user_uid: int = Field(
        64090,
        ge=1000,
        le=2**31 - 1,
        description=(
            "UID of `test_user`, identical on every host (jobs run on the nodes under the submitter's "
            "UID); an existing account with another UID fails the deploy of a multi-host cluster."
        ),
    )
    test_user_gid: int = Field(
        64090,
        ge=1000,
        le=2**31 - 1,
        description="GID of `test_user`'s primary group (named like the user), identical on every host.",
    )
    thresholds: dict[str, GpuThreshold] = Field(
        default_factory=new_dict, description="Per GPU type floors that override the built-in ones."
    )

    @model_validator(mode="after")
    def _test_user_is_unprivileged(self) -> Self:
        if self.test_user == "root":
            raise field_error(
                Training, ("test_user",), "must be an unprivileged user, not root", self.test_user
            )
        return self

    @model_validator(mode="after")
    def _examples_dir_is_its_own(self) -> Self:
        # roles/login removes the files there that the build lacks: no other directory may be in it
        examples = PurePosixPath(self.examples_dir)
        for name in ("venv_path", "work_dir"):
            other = PurePosixPath(getattr(self, name))
            if examples == other or examples in other.parents or other in examples.parents:
                raise field_error(
                    Training, ("examples_dir",),
                    f"must be a directory of its own, not {name} ({other}), inside it or above it: "
                    "the deploy removes the files there that are not job templates", self.examples_dir,
                )
        return self


HEALTH_CHECK_NODE_STATES = ("ALLOC", "ANY", "CYCLE", "IDLE", "MIXED")


def _check_node_states(value: str) -> str:
    """HealthCheckNodeState: a comma-separated list of Slurm 22.05's words."""
    words = value.split(",")
    unknown = [word for word in words if word not in HEALTH_CHECK_NODE_STATES]
    if unknown:
        raise ValueError(f"{value!r}: not a list of {', '.join(HEALTH_CHECK_NODE_STATES)} (comma-separated)")
    return value


class HealthCheck(StrictModel):
    """The node health check (cluster-cli's, Slurm's HealthCheckProgram): a node that fails it is
    drained with a reason starting `cluster-cli health:`, and resumed when it passes again; a
    drain with any other reason is never touched."""

    enabled: bool = Field(
        True, description="Install the check on every compute host and set HealthCheckProgram in slurm.conf."
    )
    interval_s: int = Field(300, ge=10, le=86400, description="HealthCheckInterval, in seconds.")
    node_state: Annotated[str, AfterValidator(_check_node_states)] = Field(
        "ANY,CYCLE",
        description=(
            "HealthCheckNodeState: nodes in which states run it (ALLOC, ANY, IDLE, MIXED; CYCLE spreads "
            "the runs over the interval instead of all nodes at once)."
        ),
    )
    min_free_mb: int = Field(
        1024, ge=0, description="Free space each node needs in its SlurmdSpoolDir and in `training.work_dir`, MB."
    )
    mounts: list[HostPath] = Field(
        default_factory=new_list, description="Mount points every compute host must have mounted, e.g. `[/data]`."
    )


class MonitoringPorts(StrictModel):
    """The TCP ports of the monitoring daemons."""

    prometheus: Port = Field(9090, description="Prometheus' web and API port, on the monitoring host.")
    alertmanager: Port = Field(9093, description="Alertmanager's port, on the monitoring host.")
    node: Port = Field(9100, description="node_exporter's port, on every cluster host.")
    slurm: Port = Field(9446, description="The Slurm exporter's port, on the primary controller.")
    gpu: Port = Field(9445, description="The GPU exporter's port, on every host with GPUs NVML reads (not fake ones).")


SMARTHOST_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9.-]*:[0-9]{1,5}$"
EMAIL_PATTERN = r"^[^@\s,]+@[A-Za-z0-9][A-Za-z0-9.-]*$"


class AlertReceivers(StrictModel):
    """Where Alertmanager sends the alerts that fire (every alert to every receiver, grouped by alert
    name): webhooks, whose URLs may carry a token and are kept in files of the control node, and
    e-mail through the site's mail relay."""

    webhook_url_files: list[str] = Field(
        default_factory=new_list,
        description=(
            "Files on the control node, each holding one webhook URL on one line (your own file, chmod 600: "
            "a chat or paging service's URL is a credential); Alertmanager POSTs each alert group there."
        ),
    )
    email: list[Annotated[str, Field(pattern=EMAIL_PATTERN)]] = Field(
        default_factory=new_list, description="Addresses that get each alert group by e-mail (needs `smtp_smarthost`)."
    )
    smtp_smarthost: Annotated[str, Field(pattern=SMARTHOST_PATTERN)] | None = Field(
        None, description="The site's mail relay as `HOST:PORT`; it takes mail from the monitoring host without a login."
    )
    smtp_from: Annotated[str, Field(pattern=EMAIL_PATTERN)] | None = Field(
        None, description="The sender address of the alert mails (required with `email`)."
    )
    smtp_require_tls: bool = Field(True, description="Send mail only over STARTTLS.")
    group_wait: Annotated[str, AfterValidator(check_duration)] = Field(
        "30s", description="How long Alertmanager gathers alerts into a group before the first notice (`group_wait`)."
    )
    repeat_interval: Annotated[str, AfterValidator(check_duration)] = Field(
        "4h", description="How often a group that keeps firing is sent again (`repeat_interval`)."
    )


class Monitoring(StrictModel):
    """Prometheus on one host, scraping node_exporter on every cluster host, the Slurm exporter on
    the primary controller and the GPU exporter on every host with GPUs NVML reads, with the
    cluster's alert rules and console pages (docs/monitoring.md).
    Each daemon listens on its host's inventory address only: whoever reaches that address may
    scrape it, and the Slurm exporter serves per-account figures `PrivateData` hides from users."""

    host: Name | None = Field(
        None, description="Host running Prometheus (an inventory host); omit for no monitoring at all."
    )
    retention: Annotated[str, Field(pattern=r"^[1-9][0-9]*(h|d|w|y)$")] = Field(
        "15d", description="How long Prometheus keeps samples (`--storage.tsdb.retention.time`), e.g. `15d`."
    )
    scrape_interval_s: int = Field(
        30, ge=5, le=300, description="Seconds between scrapes, and between evaluations of the alert rules."
    )
    alertmanager: bool = Field(
        False,
        description=(
            "Also run Alertmanager on the monitoring host: with `receivers` it delivers the alerts there; "
            "without, Debian's own /etc/prometheus/alertmanager.yml stays (the site's receivers)."
        ),
    )
    receivers: AlertReceivers | None = Field(
        None, description="Where Alertmanager sends the alerts (needs `alertmanager: true`); docs/monitoring.md."
    )
    ports: MonitoringPorts = Field(default_factory=MonitoringPorts, description="The daemons' ports.")
    alert_for: dict[Annotated[str, AfterValidator(check_alert_name)], Annotated[str, AfterValidator(check_duration)]] = Field(
        default_factory=new_dict,
        description=(
            "How long an alert's condition must hold before it fires, by alert name (Prometheus' `for`, e.g. "
            "`SlurmNodesDown: 10m`); unset ones keep their defaults (docs/monitoring.md#alert-rules)."
        ),
    )


class Mpi(StrictModel):
    """MPI launch through Slurm (docs/mpi.md): `MpiDefault`, the PMIx library Slurm's plugin opens,
    Open MPI on login and compute hosts and mpi4py in the training environment."""

    enabled: bool | None = Field(
        None,
        description=(
            "Set MPI up; `null`: on where GPU nodes run on more than one host (multi-host training codes "
            "start their ranks with `srun --mpi=pmix`), off on one host (torchrun needs no MPI)."
        ),
    )
    plugin: Literal["pmix", "pmi2"] | None = Field(
        None,
        description=(
            "`MpiDefault`: `pmix` (Debian's Open MPI starts under srun only with it) or `pmi2` (MPICH and "
            "other PMI-2 codes); `srun --mpi=` picks the other for one step. `null`: `pmix`, or `pmi2` "
            "where `slurm.version` pins a series that ships no PMIx plugin."
        ),
    )
    mpi4py_version: Annotated[str, Field(pattern=r"^[0-9][0-9A-Za-z.+]*$")] | None = Field(
        "4.1.2",
        description="mpi4py installed in the training environment (its wheels load the release's Open MPI); `null`: none.",
    )


def _check_oci_conf_value(item: Any) -> Any:
    if isinstance(item, str) and ('"' in item or not item.isprintable()):
        raise ValueError(f"{item!r}: an oci.conf value is written in double quotes: it cannot hold '\"' or control characters")
    return item


# oci.conf values are patterns with spaces (`runc ... run %n.%u.%j.%s.%t -b %b`): written quoted.
OciConfOverrides = dict[
    Annotated[str, AfterValidator(_check_override_key)], Annotated[Any, AfterValidator(_check_oci_conf_value)]
]


class Containers(StrictModel):
    """Slurm's own OCI container support (docs/containers.md): `srun --container=BUNDLE` with the
    runtime called rootless through oci.conf, on compute hosts."""

    enabled: bool = Field(
        False,
        description=(
            "Install the runtime on compute and login hosts and write oci.conf: `srun --container=BUNDLE` "
            "runs the step in the bundle's root filesystem. Off: no oci.conf (Slurm then ignores `--container`)."
        ),
    )
    runtime: Literal["runc"] = Field(
        "runc",
        description=(
            "The OCI runtime Slurm calls as the job's user, rootless (the only mode Slurm's `--container` has): "
            "`runc`, Debian's package."
        ),
    )
    oci_conf: OciConfOverrides = Field(
        default_factory=new_dict,
        description=(
            "oci.conf keys over the rendered ones (the RunTime* patterns); each must be one the target Slurm "
            "series' oci.conf(5) documents; null deletes a rendered key."
        ),
    )
    image: AbsolutePath | None = Field(
        None,
        description=(
            "An image's root filesystem on the compute hosts, for the smoke check `container` (made with "
            "training/container_image.py; on the shared work area where there is one). `null`: the check skips."
        ),
    )


class Secrets(StrictModel):
    """Where generated secrets (munge key, database password) are kept on the control node."""

    dir: ControlDir | None = Field(
        None,
        description=(
            "Directory (0700): an absolute path or `~/...`, not a system directory; default "
            "`~/.local/state/cluster-cli/CLUSTER/secrets`."
        ),
    )


class Deploy(StrictModel):
    """How `cluster-cli deploy` rolls out to the compute hosts: in waves (Ansible's `serial` on the
    compute play) and how many failed hosts a wave may have before the rollout stops."""

    batch: int | None = Field(
        None,
        ge=1,
        description=(
            "Default of `deploy --batch N`: at most N slurmd restart at a time, the compute hosts in "
            "waves; unset: every compute host at once."
        ),
    )
    max_fail_percentage: int | None = Field(
        None,
        ge=0,
        le=100,
        description=(
            "Ansible's `max_fail_percentage` of the compute play, per wave: the rollout stops when "
            "more than this percentage of a wave's hosts failed (a wave whose hosts all failed "
            "always stops it). Unset: 0 with `--batch` (a failed host stops the rollout), 100 "
            "without. `deploy --max-fail-percentage` overrides it."
        ),
    )


MOUNT_TYPE_PATTERN = r"^[a-z0-9][a-z0-9_+-]*(\.[a-z0-9][a-z0-9_+-]*)?$"  # nfs4, fuse.sshfs, lustre
MOUNT_OPTION_PATTERN = r"^[^\s,]+$"  # one item of the comma-separated Options=/fstab field
MOUNT_MODE_PATTERN = r"^0?[0-7]{3}$"
MOUNT_SELECTORS = ("controllers", "database", "login", "compute", "monitoring")


def _check_mount_source(value: str) -> str:
    _check_word(value)  # one field of an fstab line
    return value


MountSource = Annotated[str, AfterValidator(_check_mount_source)]
MountType = Annotated[str, Field(pattern=MOUNT_TYPE_PATTERN, max_length=64)]
MountOption = Annotated[str, Field(pattern=MOUNT_OPTION_PATTERN)]


class Mount(StrictModel):
    """A shared file system the hosts mount at boot and at deploy (roles/storage_client): a systemd
    mount unit, or a line of /etc/fstab's cluster-cli block on a host without systemd."""

    source: MountSource = Field(
        description=(
            "What is mounted: `SERVER:/EXPORT` for `nfs`/`nfs4`, `[USER@]HOST:[PATH]` for `fuse.sshfs`, "
            "a device, URI or name as the type's mount helper takes it otherwise."
        ),
    )
    path: AbsolutePath = Field(
        description="The mount point on each host; not in a system directory, nor inside another mount."
    )
    type: MountType = Field(
        "nfs",
        description=(
            "The file system type as mount(8) takes it: `nfs`, `nfs4` first-class; `fuse.sshfs`, `cephfs`, "
            "`glusterfs`, `lustre`, `beegfs` ... passed through with their options."
        ),
    )
    options: list[MountOption] | None = Field(
        None,
        description=(
            "Mount options, each one item (no comma or space); omitted: the type's defaults "
            "(docs/storage.md), given: these instead of them."
        ),
    )
    hosts: list[Name] | None = Field(
        None,
        min_length=1,
        description=(
            "Which hosts mount it: `controllers`, `database`, `login`, `compute`, `monitoring` "
            "and/or node group names; omitted: every cluster host."
        ),
    )
    owner: UserName | None = Field(
        None, description="Owner of the mount point directory, made where missing before the mount; null: root."
    )
    group: UserName | None = Field(None, description="Its group; null: root.")
    mode: Annotated[str, Field(pattern=MOUNT_MODE_PATTERN)] | None = Field(
        None,
        description="Its mode, octal as a string; null: `\"0755\"`. Once mounted, the file system's root shows its own.",
    )
    automount: bool = Field(
        False,
        description=(
            "Mount on first access (a systemd `.automount` unit) rather than at boot; hosts without systemd "
            "mount it at once."
        ),
    )
    client_installed: bool = Field(
        False,
        description=(
            "The site installs this type's client itself (required for types this release cannot install "
            "from Debian: `lustre`, `beegfs` ...)."
        ),
    )


# A client of an export as exports(5) names it: a host name or address, a subnet (ADDRESS/PREFIX), a
# wildcard name (*.example.org) or an @netgroup; no parenthesis or space (those end it in the file).
NFS_CLIENT_PATTERN = r"^@?[A-Za-z0-9*?:][A-Za-z0-9*?._:/-]*$"
EXPORT_MODE_PATTERN = r"^[0-7]?[0-7]{3}$"  # with the sticky bit: 1777
# an exported directory as exports(5) takes it unquoted
EXPORT_PATH_PATTERN = r"^/[A-Za-z0-9._/+@-]*$"
# One option of an export's option list: rw, sync, sec=krb5p, anonuid=65534 ...
NFS_EXPORT_OPTION_PATTERN = r"^[a-z_]+(=[A-Za-z0-9_:.@/-]+)?$"
NfsClient = Annotated[str, Field(pattern=NFS_CLIENT_PATTERN, max_length=255)]
NfsExportOption = Annotated[str, Field(pattern=NFS_EXPORT_OPTION_PATTERN, max_length=255)]


class NfsExport(StrictModel):
    """A directory the NFS server exports (roles/nfs_server), and by default mounts on the login and
    compute hosts at the same path."""

    path: Annotated[AbsolutePath, Field(pattern=EXPORT_PATH_PATTERN)] = Field(
        description="The directory on the server, made with `owner`, `group` and `mode` where missing; the clients mount it at the same path."
    )
    clients: list[NfsClient] | None = Field(
        None,
        min_length=1,
        description=(
            "Who may mount it: host names, addresses or subnets (`10.0.0.0/16`) as exports(5) takes them; "
            "omitted: every other cluster host's inventory address. The world (`*`, `0.0.0.0/0`, `::/0`) is refused."
        ),
    )
    options: list[NfsExportOption] | None = Field(
        None,
        description=(
            "The export's options; omitted: `rw,sync,root_squash,no_subtree_check`, given: these instead of them. "
            "`no_root_squash` is refused."
        ),
    )
    owner: UserName | None = Field(None, description="Owner of the directory, made where missing; null: root.")
    group: UserName | None = Field(None, description="Its group; null: root.")
    mode: Annotated[str, Field(pattern=EXPORT_MODE_PATTERN)] | None = Field(
        None, description="Its mode, octal as a string (`\"1777\"`: sticky); null: `\"0755\"`. An existing directory is left as it is."
    )
    mount: bool = Field(
        True,
        description=(
            "Mount it (`nfs4`, `SERVER:PATH` at `path`) on the login and compute hosts other than the server, unless "
            "`storage.mounts` has a mount at that path already; false: only exported."
        ),
    )


class NfsServer(StrictModel):
    """An NFS server on one inventory host (Debian's nfs-kernel-server), for a cluster without storage of its own."""

    host: Name = Field(description="The inventory host that exports the directories (a `hosts` entry or a compute host).")
    exports: list[NfsExport] | None = Field(
        None,
        description=(
            "The exported directories; omitted: `/home` (mode 0755) and the work area `/shared` (mode 1777: each "
            "user makes a directory of their own there) with the default clients and options."
        ),
    )


class Storage(StrictModel):
    """Shared file systems: home directories, a work area for checkpoints and data sets."""

    mounts: list[Mount] = Field(
        default_factory=new_list,
        description="The mounts; an empty list unmounts what an earlier deploy mounted (when nothing uses it).",
    )
    nfs_server: NfsServer | None = Field(
        None,
        description=(
            "An inventory host that exports home directories and a work area over NFS (docs/storage.md); omit for none."
        ),
    )


class Inventory(StrictModel):
    """A Slurm GPU cluster."""

    cluster_name: Annotated[str, Field(pattern=CLUSTER_NAME_PATTERN)] = Field(
        description="ClusterName: lowercase letters, digits, - and _."
    )
    ssh: SshSettings = Field(default_factory=SshSettings, description="Default SSH settings.")
    hosts: list[Host] = Field(
        default_factory=new_list, description="Controllers, database, login, single-host machines."
    )
    controllers: Controllers = Field(description="The slurmctld hosts.")
    accounting: Accounting = Field(default_factory=Accounting, description="slurmdbd, MariaDB and sacct.")
    people: People = Field(
        default_factory=People, description="Linux users and groups made the same on every host."
    )
    login: list[Name] = Field(default_factory=new_list, description="Login hosts.")
    node_groups: list[NodeGroup] = Field(
        min_length=1, description="Compute nodes, in groups of identical hardware."
    )
    partitions: list[Partition] = Field(
        min_length=1, description="Slurm partitions; every node is in at least one."
    )
    topology: Topology | None = Field(None, description="The fabric for topology.conf; omit for none.")
    cgroup: Cgroup = Field(default_factory=Cgroup, description="cgroup.conf.")
    slurm: Slurm = Field(
        default_factory=Slurm, description="Slurm packages, user, ports, paths and slurm.conf overrides."
    )
    munge: Munge = Field(default_factory=Munge, description="MUNGE user and group.")
    node_access: NodeAccess = Field(
        default_factory=NodeAccess, description="SSH access to compute hosts (pam_slurm_adopt)."
    )
    nccl: Nccl = Field(default_factory=Nccl, description="/etc/nccl.conf.")
    training: Training = Field(
        default_factory=Training, description="Training environment and smoke-job thresholds."
    )
    package_mirror: PackageMirror | None = Field(
        None,
        description=(
            "Local apt and pip sources for air-gapped clusters; omit to keep every host's own sources."
        ),
    )
    secrets: Secrets = Field(default_factory=Secrets, description="Where generated secrets are kept.")
    health_check: HealthCheck = Field(
        default_factory=HealthCheck, description="The node health check and what it drains nodes for."
    )
    deploy: Deploy = Field(
        default_factory=Deploy, description="How deploy rolls out to the compute hosts: waves, failed-host threshold."
    )
    priority: Priority = Field(
        default_factory=Priority, description="Job priority (fair share) and preemption in slurm.conf."
    )
    mpi: Mpi = Field(default_factory=Mpi, description="MPI launch: MpiDefault, PMIx, Open MPI, mpi4py.")
    containers: Containers = Field(
        default_factory=Containers, description="Container jobs: `srun --container` through oci.conf and rootless runc."
    )
    monitoring: Monitoring = Field(
        default_factory=Monitoring, description="Prometheus, node_exporter and the Slurm exporter; off unless `host` is set."
    )
    storage: Storage | None = Field(
        None,
        description=(
            "Shared file systems mounted on the cluster's hosts (docs/storage.md); omit for none, and "
            "nothing about mounts is touched."
        ),
    )

    @model_validator(mode="after")
    def _test_user_apart_from_the_daemons(self) -> Self:
        training = self.training
        errors: list[tuple[tuple[str, ...], str, Any]] = []
        daemons = {self.slurm.user: "slurm.user", "munge": "the munge user"}
        if training.test_user in daemons:
            message = f"{training.test_user!r} is {daemons[training.test_user]}; the smoke jobs need an ordinary user"
            errors.append((("training", "test_user"), message, training.test_user))
        daemon_ids = (
            ("test_user_uid", training.test_user_uid, {self.slurm.uid: "slurm.uid", self.munge.uid: "munge.uid"}),
            ("test_user_gid", training.test_user_gid, {self.slurm.gid: "slurm.gid", self.munge.gid: "munge.gid"}),
        )
        for field, wanted, taken in daemon_ids:
            if wanted in taken:
                errors.append((("training", field), f"{wanted} is also {taken[wanted]}", wanted))
        if errors:
            raise field_errors(Inventory, errors)
        return self

    def autodetects_gpus(self) -> bool:
        """Some node group asks NVML for its GPUs (gres.conf `AutoDetect=nvml`): its hosts need
        Slurm's NVML plugin."""
        return any(group.gpus is not None and group.gpus.autodetect == "nvml" for group in self.node_groups)


def models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    """The models inside a field's type (``Optional[X]``, ``list[X]``, ``dict[str, X]``,
    ``Annotated[X, ...]``, unions), in order: where the docs and the loader's hints look for fields."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for argument in typing.get_args(annotation):
        yield from models_in(argument)
