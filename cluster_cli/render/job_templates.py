"""The job templates for the people who submit work (training/examples), rendered for this
cluster: its training partition, GPU type, CPUs and training environment. The build's examples/
directory; roles/login copies it to `training.examples_dir` on every login host.

Files ending in .j2 are Jinja templates (the suffix is dropped), files starting with `_` are the
pieces they include, everything else is copied as it is. The files in ONLY_WITH are rendered only
for a cluster whose `training` section sets the field named there (Ray's templates: ray_version).
"""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from cluster_cli.cluster import Cluster
from cluster_cli.model import NodeGroup, Partition
from cluster_cli.paths import project_dir
from cluster_cli.render.mem_defaults import group_cpus
from cluster_cli.role_defaults import role_default
from cluster_cli.slurm_associations import minutes

EXAMPLES_BUILD_DIR = "examples"
GUIDE = "using-the-cluster.md"
# Where containers are on: the tool that makes a user's bundle (training/, shared with the smoke check).
BUNDLE_TOOL = "container_bundle.py"
# The files a user runs with bash; sbatch reads the others.
EXECUTABLE = frozenset({"chain.sh", "interactive.sh", "submit-sweep.sh"})
# Files for an optional part of the training environment: file -> the `training` field that must be set.
ONLY_WITH = {"ray.sbatch.j2": "ray_version", "ray_tasks.py": "ray_version"}
# The time limit the templates ask for, or the partition's MaxTime where that is shorter.
TIME_LIMIT_MINUTES = 30


@dataclass(frozen=True)
class TemplatePartition:
    """The partition the templates submit to, and what they ask of its nodes."""

    name: str
    gpus_per_node: int  # 0: a partition without GPUs
    gpu_type: str | None
    cpus_per_node: int
    time_limit: str  # HH:MM:00

    @property
    def gpu_request(self) -> str:
        """--gpus-per-node's value: every GPU of a node, by type where the partition has one."""
        return self._gpus(self.gpus_per_node) if self.gpus_per_node else ""

    @property
    def gpu_request_one(self) -> str:
        return self._gpus(1) if self.gpus_per_node else ""

    @property
    def summary(self) -> str:
        """For people: "8 h100 GPUs and 128 CPUs per node"."""
        cpus = f"{self.cpus_per_node} CPUs per node"
        if not self.gpus_per_node:
            return f"{cpus}, no GPUs"
        kind = f"{self.gpu_type} " if self.gpu_type else ""
        return f"{self.gpus_per_node} {kind}GPU{'s' if self.gpus_per_node > 1 else ''} and {cpus}"

    @property
    def cpus_per_gpu(self) -> int:
        return max(1, self.cpus_per_node // max(1, self.gpus_per_node))

    def _gpus(self, count: int) -> str:
        return f"{self.gpu_type}:{count}" if self.gpu_type else str(count)


@dataclass(frozen=True)
class PartitionRow:
    name: str
    default: bool
    nodes: int
    gpus: str
    cpus: str
    max_time: str


def template_partition(cluster: Cluster) -> TemplatePartition:
    """Where the multi-node templates go: the default partition when all its nodes have GPUs, else
    the first such partition, else the default (the templates then run on CPUs)."""
    return _described(cluster, _first(_names(cluster, gpus=True), cluster.default_partition))


def one_gpu_partition(cluster: Cluster) -> TemplatePartition:
    """Where the jobs of one GPU go (a sweep's tasks, the evaluation, the interactive shell): as
    template_partition's, but not one whose nodes are given whole (OverSubscribe=EXCLUSIVE), where
    one GPU would hold a node of several; that partition when there is no other."""
    return _described(cluster, _one_gpu_name(cluster))


def light_partition(cluster: Cluster) -> str:
    """Where a job of one CPU for a few minutes goes (the sweep's collector): a shared partition
    without GPUs, the default one first, else one_gpu_partition's."""
    names = _names(cluster, gpus=False, shared=True)
    return _first(names, cluster.default_partition) if names else _one_gpu_name(cluster)


def _one_gpu_name(cluster: Cluster) -> str:
    shared = _names(cluster, gpus=True, shared=True)
    return _first(shared or _names(cluster, gpus=True), cluster.default_partition)


def _names(cluster: Cluster, gpus: bool, shared: bool = False) -> list[str]:
    """The partitions whose nodes all have GPUs (gpus) or none has (not gpus), in inventory order;
    with ``shared``, only those that do not give their nodes whole."""
    return [item.name for item in cluster.inventory.partitions
            if (groups := cluster.partitions[item.name].groups)
            and all(bool(group.gpus) is gpus for group in groups)
            and not (shared and item.oversubscribe == "EXCLUSIVE")]


def _first(names: list[str], preferred: str) -> str:
    """``preferred`` when it is among ``names``, else the first of them; ``preferred`` when there are none."""
    return preferred if preferred in names or not names else names[0]


def _described(cluster: Cluster, name: str) -> TemplatePartition:
    groups = cluster.partitions[name].groups
    gpu_counts = [group.gpus.count for group in groups if group.gpus]
    gpu_types = {group.gpus.type for group in groups if group.gpus}
    return TemplatePartition(
        name=name,
        gpus_per_node=min(gpu_counts) if len(gpu_counts) == len(groups) else 0,
        gpu_type=gpu_types.pop() if len(gpu_types) == 1 else None,
        cpus_per_node=min(group_cpus(group) for group in groups),
        time_limit=_time_limit(_partition(cluster, name).max_time),
    )


def _partition(cluster: Cluster, name: str) -> Partition:
    return next(item for item in cluster.inventory.partitions if item.name == name)


def _time_limit(max_time: str) -> str:
    limit = minutes(max_time)
    chosen = TIME_LIMIT_MINUTES if limit is None else min(limit, TIME_LIMIT_MINUTES)
    return f"{chosen // 60:02d}:{chosen % 60:02d}:00"


def partition_rows(cluster: Cluster) -> list[PartitionRow]:
    rows = []
    for item in cluster.inventory.partitions:
        members = cluster.partitions[item.name]
        rows.append(PartitionRow(item.name, item.default, len(members.names), _gpus(members.groups),
                                 _span(sorted({group_cpus(group) for group in members.groups})), item.max_time))
    return rows


def _gpus(groups: list[NodeGroup]) -> str:
    kinds = sorted({f"{group.gpus.count} x {group.gpus.type}" if group.gpus.type else str(group.gpus.count)
                    for group in groups if group.gpus})
    return ", ".join(kinds)


def _span(values: list[int]) -> str:
    return str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}"


def render_job_templates(cluster: Cluster) -> list[tuple[str, str, int]]:
    """(build directory path, text, mode) of every example and the user guide."""
    project = project_dir()
    source = project / "training" / "examples"
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(source), undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True, trim_blocks=True, autoescape=False,
        # bash's ${#array[@]} would open a Jinja comment: the templates have no comments
        comment_start_string="<%#", comment_end_string="#%>",
    )
    training = cluster.inventory.training
    context = {
        "cluster_name": cluster.name,
        "partition": template_partition(cluster),
        "one_gpu": one_gpu_partition(cluster),
        "light_partition": light_partition(cluster),
        "partitions": partition_rows(cluster),
        "venv": training.venv_path,
        "ray_version": training.ray_version,
        "containers": cluster.inventory.containers.enabled,
        "examples_dir": training.examples_dir,
        "nccl": cluster.inventory.nccl.env,
        "nccl_conf_path": role_default("nccl_conf_path", project / "roles"),
    }
    files = [(f"{EXAMPLES_BUILD_DIR}/{GUIDE}", (project / "docs" / GUIDE).read_text(encoding="utf-8"), 0o644)]
    for path in sorted(source.iterdir()):
        if path.name.startswith(("_", ".")) or not path.is_file():
            continue
        if path.name in ONLY_WITH and getattr(training, ONLY_WITH[path.name]) is None:
            continue
        if path.suffix == ".j2":
            name, text = path.stem, environment.get_template(path.name).render(context)
        else:
            name, text = path.name, path.read_text(encoding="utf-8")
        files.append((f"{EXAMPLES_BUILD_DIR}/{name}", text, 0o755 if name in EXECUTABLE else 0o644))
    if cluster.inventory.containers.enabled:
        bundle_tool = project / "training" / BUNDLE_TOOL
        files.append((f"{EXAMPLES_BUILD_DIR}/{BUNDLE_TOOL}", bundle_tool.read_text(encoding="utf-8"), 0o644))
    return files
