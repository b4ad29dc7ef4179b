"""What the smoke suite runs against: one plain dataclass, easy to build from an inventory."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cluster_cli.smoke import thresholds as _thresholds



def _default_training_dir() -> Path:
    """training/ (the scripts and sbatch files the training checks submit): the source checkout's,
    else the copy an installed wheel carries in cluster_cli/share (see setup.py)."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package.parent / "training", package / "share" / "training"):
        if (candidate / "launch.sh").is_file():
            return candidate
    return package.parent / "training"


DEFAULT_TRAINING_DIR = _default_training_dir()


@dataclass
class SmokeTarget:
    """A Slurm cluster to smoke-test.

    Only ``nodes`` and ``work_dir`` are required. Jobs are submitted as ``user`` (never root);
    ``work_dir`` must be visible at the same path on the submit host and on every node.
    """

    nodes: list[str]
    """Slurm node names the suite must reach (every one is used by the all-node checks)."""
    work_dir: Path
    """Shared directory for scripts, job output and checkpoints; one sub-directory per run."""
    partition: str | None = None
    """Partition to submit to; None: the cluster's default partition."""
    slurm_conf: Path | None = None
    """slurm.conf for the client commands (exported as SLURM_CONF); None: the default lookup."""
    gpus_per_node: int = 0
    """GPUs (gres/gpu) each node offers; 0 skips the GPU checks."""
    gpu_type: str | None = None
    """e.g. "H100", "H200" (a torch device name also works); None: detect from the GPU check."""
    fake_gpus: bool = False
    """GPUs are fake device files: binding is checked, performance checks skip."""
    accounting_enabled: bool = False
    """slurmdbd accounting is configured; when False the sacct check skips."""
    user: str = "smoke"
    """Unprivileged user that submits every job."""
    create_user: bool = True
    """When running as root, create ``user`` on this host if it is missing (useradd)."""
    user_uid: int | None = None
    user_gid: int | None = None
    """The ids ``user`` gets when it is created here (the cluster's, so they match the nodes')."""
    torch_installed: bool = True
    """False where the training environment has no torch: the training checks skip."""
    python: str = "python3"
    """Python on the nodes that has torch (the training venv), used by the training checks."""
    thresholds: dict[str, float | None] = field(default_factory=dict)
    """Overrides of the per-GPU-type defaults (keys in thresholds.THRESHOLD_KEYS; None unsets)."""
    check_timeout_s: float = 180.0
    """Longest any one check may take before it is cancelled and failed."""
    cpu_ranks_per_node: int = 1
    """Training ranks per node when there is no real GPU (gloo on CPU)."""
    gpu_device_glob: str = "/dev/nvidia[0-9]*"
    """Where the GPU device files are on the nodes (fake GPUs: e.g. /dev/fake-gpu/nvidia[0-9]*)."""
    expedite_requeue: bool = True
    """Preempt check: move the requeued job's start time to now. Slurm otherwise holds a requeued
    job for AuthInfo cred_expire (default 120 s) before it may start again."""
    job_args: list[str] = field(default_factory=list)
    """Extra options for every sbatch/srun/salloc (e.g. ["--account=ops", "--qos=debug"])."""
    training_dir: Path = DEFAULT_TRAINING_DIR
    """Directory with the training scripts; copied into each run directory."""
    scope: str = "whole"
    """Which checks run here (registry.SCOPES): "whole" every check; "partition" the cluster
    checks over every node of ``partition``; "group" the per-group checks on ``group``'s nodes."""
    group: str | None = None
    """The node group of a "group" target (its name in the inventory), for the report."""
    sample: int | None = None
    """Per-group checks use at most this many of ``nodes`` (usable ones first); None: all."""
    exclude_nodes: list[str] = field(default_factory=list)
    """Nodes of ``partition`` outside this target: every job of a group target excludes them,
    so a job of any size lands on this group's nodes only."""
    gres_type: str | None = None
    """The GPU type as Slurm names it (gres/gpu:TYPE), e.g. "h100"; None: untyped GPUs."""
    cpus_per_node: int = 1
    """CPUs Slurm schedules on each node (the node-fill check on CPU-only nodes)."""
    node_devices: dict[str, list[str]] = field(default_factory=dict)
    """Each node's GPU device files, where known: the evidence of which GPUs a task owns."""
    qos_limit: dict[str, Any] | None = None
    """qos-limit check: {"qos", "account", "gpus", "deny"}: a QoS whose MaxTRESPerUser caps each
    user at "gpus" GPUs, usable by ``user`` in "account" ("deny": its DenyOnLimit flag, which
    refuses the job at submission instead of holding it); None: the check skips."""
    fairshare: dict[str, Any] | None = None
    """fairshare check: {"accounts": [high, low], "shares": [s_high, s_low], "qos", "gpu_caps",
    "neutral"}: two sibling accounts ``user`` may charge whose fair-share shares differ (the larger
    first), a QoS usable in both, each one's GrpTRES gres/gpu cap (None: none) and another account
    of ``user`` for the job that holds a node (None: none); None: the check skips."""
    mpi_plugin: str | None = None
    """mpi check: the cluster's MPI plugin (MpiDefault: "pmix" or "pmi2"); None: MPI is off, the check skips."""
    mpi4py: bool = False
    """mpi check: the training environment (``python``) has mpi4py; False: the check skips."""
    containers: bool = False
    """container check: the cluster has oci.conf and the runtime (containers.enabled); False: it skips."""
    container_image: str | None = None
    """container check: the image's root filesystem on the nodes (containers.image); None: it skips."""
    preemption: dict[str, str] | None = None
    """Preempt check: {"qos", "by", "account"}: the job runs in QoS "qos" and Slurm preempts it
    (REQUEUE) for a job of QoS "by", both usable by ``user`` in "account"; None: the check sends
    the job its checkpoint signal itself (scancel --signal=USR1)."""

    def __post_init__(self) -> None:
        self.nodes = list(self.nodes)
        self.work_dir = Path(self.work_dir)
        self.training_dir = Path(self.training_dir)
        if self.slurm_conf is not None:
            self.slurm_conf = Path(self.slurm_conf)
        if not self.nodes:
            raise ValueError("SmokeTarget.nodes: at least one node is needed")
        if self.gpus_per_node < 0 or self.cpu_ranks_per_node < 1:
            raise ValueError("gpus_per_node must be >= 0 and cpu_ranks_per_node >= 1")
        if self.check_timeout_s <= 0:
            raise ValueError("check_timeout_s must be positive")
        if self.scope not in ("whole", "partition", "group"):
            raise ValueError(f"SmokeTarget.scope: {self.scope!r} is not whole, partition or group")
        if self.sample is not None and self.sample < 1:
            raise ValueError("SmokeTarget.sample must be at least 1")
        if self.user == "root":
            raise ValueError("SmokeTarget.user: jobs must not run as root")
        _thresholds.resolve(self.gpu_type, self.thresholds)  # unknown keys fail early

    @property
    def label(self) -> str:
        """Where the checks run, for people: ``gpu``, ``gpu/h100`` (partition/group)."""
        return "/".join(part for part in (self.partition, self.group) if part) or "default"

    @property
    def real_gpus(self) -> bool:
        return self.gpus_per_node > 0 and not self.fake_gpus

    @property
    def ranks_per_node(self) -> int:
        return self.gpus_per_node if self.real_gpus else self.cpu_ranks_per_node

    def resolved_thresholds(self, detected_gpu: str | None = None) -> _thresholds.Thresholds:
        """Bounds in force: GPU-type defaults (none on CPU or fake GPUs) plus overrides."""
        gpu_type = (self.gpu_type or detected_gpu) if self.real_gpus else None
        return _thresholds.resolve(gpu_type, self.thresholds)

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        return {key: (str(value) if isinstance(value, Path) else value) for key, value in data.items()}
