"""Benchmark: the real CLI (`validate`, `render`, `--version`) end to end at ~10k and ~50k nodes, several shapes.

    python benchmarks/render_scale.py                        # median of 5 runs, writes docs/benchmarks.md
    python benchmarks/render_scale.py --runs 9 --no-write
    python benchmarks/render_scale.py --before ../wt-base    # also time a checkout of an older commit, interleaved
    python benchmarks/render_scale.py --only groups-19 --profile   # cProfile of one in-process render

Each point is a fresh interpreter, as a user runs it: ``python -m cluster_cli render INVENTORY -o DIR``
(and ``validate INVENTORY``), start-up included, timed from the parent: wall-clock seconds, the CPU
seconds of the child (user + system, from ``os.wait4``: what the work costs whatever else runs on the
machine) and its peak RSS. ``--version`` alone is the start-up. With ``--before TREE`` every run of
the current tree is paired with one of TREE (the same interpreter, ``PYTHONPATH=TREE``), so both see
the same load.

Shapes (the inventory text is generated here, `benchmarks/render_10k.py`'s style):
- ``4-groups``: render_10k.py's inventory (4 big groups, leaves of 32 nodes, 3 partitions, one per group),
  and the same with every group 5 times larger;
- ``groups-N``: N groups of 512 nodes (19: 9,728 nodes; 95: 48,640), a 3-level tree (leaves of 64 nodes,
  16 leaves per spine, a core: 163 switches at 9,728 nodes), four overlapping partitions (all nodes, the
  GPU groups, every other group, and hostlist slices of the first nodes of every group), HA controllers;
- ``small-N``: N groups of 32 nodes (304: 9,728 nodes; 1,520: 48,640), topology and partitions as above.

Goal (issue 17 item 5): 10,000 nodes of any shape validated and rendered in <= 0.3 s end to end,
start-up included; growth linear in nodes (the per-node cost is fitted between the two sizes).

Results go to docs/benchmarks.md under "## Render at scale: the CLI end to end" (only that section is touched).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import render_10k  # same directory: its inventory, machine facts and section writer

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
HEADING = "## Render at scale: the CLI end to end"
GOAL_SECONDS = 0.3
GROUP_SIZE = 512
SMALL_GROUP_SIZE = 32
LEAF_SIZE = 64
LEAVES_PER_SPINE = 16
# GPUs per node, GPU type, sockets, cores per socket, threads, memory (MiB); group i takes KINDS[i % 4]
KINDS = [
    (8, "h100", 2, 56, 2, 1_950_000),
    (8, "a100", 2, 32, 2, 980_000),
    (4, "l40s", 2, 32, 2, 490_000),
    (0, None, 2, 64, 2, 490_000),
]


def _addresses(first: int, count: int) -> str:
    """``count`` consecutive addresses from the ``first``-th of 10.0.0.0/8 (offset past 10.0.0.x),
    as hostlist pieces within each /24."""
    parts = []
    index, left = first + 256, count
    while left:
        a, rest = divmod(index, 65536)
        b, c = divmod(rest, 256)
        run = min(left, 256 - c)
        parts.append(f"10.{a}.{b}.[{c}-{c + run - 1}]" if run > 1 else f"10.{a}.{b}.{c}")
        index, left = index + run, left - run
    return ",".join(parts)


def _compress(names: list[int], prefix: str, width: int) -> str:
    return f"{prefix}[{names[0]:0{width}d}-{names[-1]:0{width}d}]" if len(names) > 1 else f"{prefix}{names[0]:0{width}d}"


def groups_text(groups: int, group_size: int) -> str:
    """The ``groups-N``/``small-N`` shapes: many groups, a deep tree, four overlapping partitions."""
    hosts_end = render_10k.HEADER.index("controllers: {primary: ctl1, backup: ctl2}")
    lines = [
        *render_10k.HEADER[:hosts_end],
        "  - {name: login2, address: 10.0.0.21}",
        *render_10k.HEADER[hosts_end:],
        "login: [login1, login2]",
        "node_groups:",
    ]
    width = len(str(group_size))
    leaves: list[str] = []
    names: list[str] = []
    gpu_groups: list[str] = []
    slices: list[str] = []
    for index in range(groups):
        gpus, gpu_type, sockets, cores, threads, memory = KINDS[index % len(KINDS)]
        name = f"g{index:04d}"
        prefix = f"{name}n"
        names.append(name)
        lines += [
            f"  - name: {name}",
            f"    nodes: {prefix}[{1:0{width}d}-{group_size}]",
            f"    addresses: {_addresses(index * group_size, group_size)}",
            f"    sockets: {sockets}",
            f"    cores_per_socket: {cores}",
            f"    threads_per_core: {threads}",
            f"    real_memory_mb: {memory}",
            f"    features: [{gpu_type or 'cpu'}, rack{index // 4}]",
        ]
        if gpus:
            gpu_groups.append(name)
            lines += [
                "    gpus:",
                f"      count: {gpus}",
                f"      type: {gpu_type}",
                f"      devices: /dev/nvidia[0-{gpus - 1}]",
            ]
        slices.append(_compress(list(range(1, min(8, group_size) + 1)), prefix, width))
        # leaves run across group boundaries when groups are smaller than a leaf
        for start in range(1, group_size + 1, min(LEAF_SIZE, group_size)):
            end = min(start + LEAF_SIZE - 1, group_size)
            leaves.append(_compress(list(range(start, end + 1)), prefix, width))
    if group_size < LEAF_SIZE:  # merge small groups' pieces into leaves of LEAF_SIZE nodes
        per_leaf = LEAF_SIZE // group_size
        leaves = [",".join(leaves[i : i + per_leaf]) for i in range(0, len(leaves), per_leaf)]
    lines += [
        "partitions:",
        f"  - {{name: all, nodes: [{', '.join(names)}], default: true, max_time: 7-00:00:00}}",
        f"  - {{name: gpu, nodes: [{', '.join(gpu_groups)}], max_time: 2-00:00:00, oversubscribe: EXCLUSIVE}}",
        f"  - {{name: half, nodes: [{', '.join(names[::2])}], max_time: 1-00:00:00}}",
        f"  - {{name: debug, nodes: [{', '.join(repr(piece) for piece in slices)}], max_time: '01:00:00'}}",
        "topology:",
        "  plugin: tree",
        "  switches:",
    ]
    leaf_names = [f"leaf{i:04d}" for i in range(1, len(leaves) + 1)]
    for leaf, members in zip(leaf_names, leaves):
        lines += [f"    - name: {leaf}", f"      nodes: {members}"]
    lines += render_10k.upper_switches(leaf_names, LEAVES_PER_SPINE, 3) + render_10k.TRAILER
    return "\n".join(lines) + "\n"


def four_groups_text(scale: int) -> str:
    """render_10k.py's inventory with every group ``scale`` times larger."""
    saved = render_10k.GROUPS
    render_10k.GROUPS = [(g[0], g[1], g[2] * scale, *g[3:]) for g in saved]
    try:
        return render_10k.inventory_text()
    finally:
        render_10k.GROUPS = saved


SHAPES = {
    "4-groups-10k": lambda: four_groups_text(1),
    "4-groups-50k": lambda: four_groups_text(5),
    "groups-19": lambda: groups_text(19, GROUP_SIZE),
    "groups-95": lambda: groups_text(95, GROUP_SIZE),
    "small-304": lambda: groups_text(304, SMALL_GROUP_SIZE),
    "small-1520": lambda: groups_text(1520, SMALL_GROUP_SIZE),
}
# shape family -> (small point, large point), for the per-node fit
FAMILIES = {
    "4 groups (render_10k.py)": ("4-groups-10k", "4-groups-50k"),
    "many groups of 512, deep tree, 4 overlapping partitions": ("groups-19", "groups-95"),
    "small groups of 32, deep tree, 4 overlapping partitions": ("small-304", "small-1520"),
}


# what profiling (python -X importtime, cProfile, this script's --profile) found, and what was done
FINDINGS = (
    "Where the time went (issue 17 item 5), first round: every verb imported the whole CLI (pydantic, "
    "PyYAML, rich, the deploy, probe and smoke machinery): 0.26 s CPU for `--version`; the inventory was "
    "read by PyYAML's pure-Python parser, twice (the nesting check scans it first); the Ansible "
    "inventory was written by the standard library's pure-Python indenting JSON encoder (0.15 s for "
    "10,000 hosts); slurm.conf's NodeName lines and gres.conf scanned every node once per group "
    "(quadratic in groups: 7.1 s for 1,520 groups of 32); the cycle collector's passes over a heap that "
    "only grows took a third of the CPU at 50,000 nodes. Changed: each verb imports what it needs when "
    "it runs (tests/unit/test_cli_imports.py); libyaml's parser reads the inventory, the pure-Python one "
    "again only for the messages of a document libyaml refuses (the nesting, alias-expansion and "
    "duplicate-key checks run as before; the alias check only when the text has an anchor); "
    "`render.common.json_text` writes json.dumps's very text without the pure-Python encoder; "
    "`Cluster.group_nodes` groups the nodes once; hostlist compression and expansion avoid regular "
    "expressions and sorts on the common paths; `validate` and `render` run with the cycle collector "
    "off. Second round: `render` wrote the health check's expectations as one file per compute host "
    "(health/HOST.json, 9,728 files at 10,000 nodes), and on this machine creating a file costs 50-500 "
    "µs of kernel time: creating them (0.5-1.4 s, timed in-process) and deleting the previous build's "
    "(0.14 s) were most of `render`; writing their texts took 0.1 s more. Changed: the texts travel in "
    "at most 256 bundles, health/XX.json by the first two hex digits of the SHA-1 of the host's name "
    "(roles/slurmd takes its host's text out of its bundle: the file on each host is byte for byte the "
    "one before, tests/unit/golden keeps the per-host texts), and each text is written with what the "
    "nodes of a group share serialized once (0.045 s for 9,728 hosts' bundles). Third round (`before` in "
    "the table above is main at 99f67d6, whose `validate` and `render` are the second round's, 53ba8c2: "
    "the commits since changed the deploy only): the Ansible inventory took 0.11 s CPU for 10,000 hosts "
    "(0.03-0.04 s building a dict per host, 0.07 s writing 6 MB of indented JSON, each host repeating "
    "the variables they all have alike); validation, resolve and render expanded each group's and "
    "switch's hostlist up to three times; hostlist compression went name by name (a third of "
    "slurm.conf); every key and string of the inventory was searched for template markers. Changed: what "
    "every host has alike (the interpreter, SSH user and port, become) is written once, as the `cluster` "
    "group's vars, each host on one line by json.dumps's C encoder, filled into its kind's template "
    "(hosts that differ only in name and address); `ansible-inventory --list` sees the same hosts, "
    "groups and variables (tests/unit/test_inventory_hostvars.py), and the file is 2.5 MB, not 6 MB; "
    "`hostlist.expand` keeps what it expanded (at most 200,000 names); `hostlist.compress` splits names "
    "that all end in a digit with map and groups them in runs of one prefix; the template search runs "
    "only where the text has a marker or a backslash; the verb's imports run with the collector off too; "
    "the build's files are written with fewer system calls. Fourth round (from main at 336fe06, the "
    "third round, to fcafafd): `render` wrote a text per compute host, 6 MB in 256 bundles "
    "at 10,000 nodes (0.045-0.065 s, and most of the bytes written); a successful `validate` or "
    "`render` freed its whole heap object by object at exit (20-25 ms); pydantic's plugin lookup "
    "imported importlib.metadata (15-25 ms); the inventory was scanned for its nesting depth, token by "
    "token, before libyaml composed it (10 ms for 304 groups); each level of the Ansible inventory's JSON "
    "wrapped the text of its members, copying its 2.5 MB four times (10 ms). Changed: the build holds one document, "
    "health/expectations.json (each kind of node's expectations once, each node's kind: 0.2 MB, 4-6 "
    "ms), and each host's file is made from it for roles/slurmd (its `health_config_text` filter) and "
    "for `plan` by one function, cluster_cli/health_expectations.py (the files on the hosts are byte "
    "for byte those before: tests/unit/golden); `python -m cluster_cli` and the console script end a "
    "successful `validate` or `render` with a flushed os._exit; a stand-in for pydantic 2's private "
    "plugin loader answers as PYDANTIC_DISABLE_PLUGINS=__all__ does, without its imports; libyaml's "
    "composed nodes are walked for the depth (libyaml refuses more than 1,000 levels itself), and the "
    "pure-Python parser's fallback counts its events, so both count every collection; `json_lines` "
    "joins its pieces once; the model's empty lists and dicts come from Python functions, whose "
    "signatures pydantic reads at once (those of `list` and `dict` it parsed from their text: 5 ms); "
    "`hostlist.compress` makes one run of numbers written without leading zeros across widths (a "
    "subnet's 0-255) without a sort. Tried and "
    "dropped: the node groups' GPU variables as Ansible group vars (the per-host lines 2 ms shorter, "
    "the new groups' member lists 3.5 ms longer). Fifth round (`before` in the table above is main at "
    "fcafafd, the fourth round): libyaml's nodes were walked three times in Python after compose (the "
    "depth, the duplicate keys, SafeConstructor's build: 15 ms for 304 groups); each group's node "
    "names were compressed three times (slurm.conf, gres.conf, and inside each partition's list of "
    "every node it has: 24,000 names compressed again for four partitions), and each partition's "
    "default memory looked up the group of each of its nodes; the Ansible inventory walked the hosts "
    "once per group it lists, made a template per group (304 for small-304) and each kind's "
    "variables up to four times; a SlurmNode, a frozen dataclass, cost 0.75 µs to make; pydantic "
    "compiled the model's 138 annotations from their text at every start-up; a Slurm config value "
    "was checked character by character; a switch's nodes were counted one by one. Changed: an "
    "inventory without an anchor is built in one walk that also refuses what the depth and "
    "duplicate-key checks refuse, and leaves anything else (a merge key, a tag it does not know, a "
    "value its tag's constructor refuses) to the checks and SafeConstructor as before "
    "(tests/unit/test_loader_builder.py proves the same data, type for type, and the same errors); "
    "`hostlist.compressed_pieces` keeps what compress writes per prefix, and a partition's hostlist "
    "joins its groups' pieces and those of its hostlists, compressed together, where no two share a "
    "prefix (the text of compress depends only on the set of names; "
    "tests/unit/test_cluster_hostlists.py); a partition's groups come from the groups "
    "it names; hosts of groups with equal GPUs are one kind of host, as a node's variables take "
    "nothing else from its group (4 templates for small-304; the many_groups cluster of "
    "tests/unit/test_inventory_hostvars.py fails if a variable takes anything else), the role groups "
    "come from one pass over the hosts; SlurmNode is a named tuple (0.25 µs); model.py's "
    "annotations are evaluated at import; ConfigText is checked with str.isprintable on the whole "
    "value (the same refusals, proven over every code point); a name with one bracket group is "
    "expanded by one format, and names of one prefix are compressed without grouping. Also found "
    "and fixed on the way (not speed): a value its explicit tag cannot read (`!!int abc`) crashed "
    "`validate` with a ValueError; it is now 'invalid YAML' at its line. What is left of the "
    "10,000-node `render`, CPU in one fresh process: start-up 0.13-0.14 s (interpreter 0.02 s, click "
    "0.02 s, pydantic 0.02 s, the model's 27 classes with the pydantic modules they import 0.055 s, "
    "PyYAML 0.01 s, the loader's and renderers' modules 0.012 s); reading the YAML 0.003 s (groups of "
    "512) to 0.018 s (304 groups of 32: libyaml's compose, which makes a Python node and two marks "
    "for each of 9,500 values, is 0.013 s of it), validation 0.009-0.014 s (most of it the first "
    "expansion of every hostlist), resolve 0.026-0.032 s (a SlurmNode and a ManagedHost per node), "
    "slurm.conf 0.015-0.022 s, gres.conf and topology.conf 0.004-0.006 s, the health document 0.005 "
    "s, the Ansible inventory 0.032-0.037 s (a line per host, two groups that list every host), "
    "and the kernel's time for the process's 60 MB (16,000 page faults, 0.04 s of system time). "
    "`validate` meets the goal for every shape, and so does `render` of 4 groups and of groups of "
    "512 (0.25-0.28 s); `render` of small-304 does not, quite: 0.30-0.33 s in this session's runs "
    "(the speed of this shared machine moves by a tenth from hour to hour: `before` read 0.35-0.38 s "
    "in the same runs), its extra cost spread thin over its 304 groups (libyaml's nodes, a compress "
    "and pydantic's validation of each). Sixth round (`before` in the table above is main at acfc1fd, the "
    "fifth round): a bracket's names were made by str.format, the text around the bracket escaped for "
    "it (2.5 times the time of concatenating with str.zfill); every compute host had a set of its "
    "own for its roles and a ManagedHost with a __dict__ (the Ansible inventory then made each a "
    "frozenset again); the Ansible inventory hashed each host's kind, a tuple, three times; a "
    "multi-host group's nodes were made in a Python loop, each looking up a declared host; "
    "cluster_vars.yml was written by PyYAML's pure-Python emitter (2 ms); a partition's items were "
    "read again by Cluster, a second copy of resolve's rule. Changed: names made by concatenation; "
    "ManagedHost has slots and its roles are a frozenset shared by hosts of the same roles (peak "
    "RSS 7 MB lower at 10,000 nodes); each kind of host is a number; nodes made by map, a declared "
    "address looked up only where the group has a declared host; libyaml's emitter (the same "
    "variables read back: tests/unit/test_build_vars.py); resolve_partitions keeps each partition's "
    "groups, the groups it names and the nodes its hostlists name, and Cluster reads them. Tried and "
    "dropped: a group's node names checked in one regular-expression match over their lines (0.27 "
    "µs a name against 0.29: not worth a second way to check a name); a cache of libyaml's tag "
    "resolution (1.3 ms of the first compose); pydantic's defer_build (the classes' validators are "
    "built at the first validation instead: no gain). What is left of start-up, CPU in a fresh "
    "process: interpreter 0.02 s, click 0.006 s of its own (0.016 s with the standard library it "
    "shares with pydantic), pydantic and the pydantic modules BaseModel imports 0.045 s, the "
    "model's 27 classes 0.015 s, PyYAML 0.011 s (two thirds of it compiling PyYAML's regular "
    "expressions), ours 0.012 s."
)


@dataclass
class Runs:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)

    def add(self, wall: float, cpu: float, rss_mb: float) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.rss_mb.append(rss_mb)

    def cell(self) -> str:
        return (
            f"{statistics.median(self.wall):.2f} s | {statistics.median(self.cpu):.2f} s | "
            f"{statistics.median(self.rss_mb):.0f} MB"
        )


def run_cli(tree: Path, args: list[str], state: Path) -> tuple[float, float, float]:
    """Run ``python -m cluster_cli ARGS`` with TREE first on the path; wall s, CPU s, peak RSS MB."""
    env = dict(os.environ, PYTHONPATH=str(tree), XDG_STATE_HOME=str(state))
    # as an installed cluster-cli runs: from byte code compiled once (pip compiles it), not from source
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    start = time.perf_counter()
    pid = os.posix_spawn(
        sys.executable, [sys.executable, "-P", "-m", "cluster_cli", *args], env,  # -P: TREE, not the current directory
        file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)],
    )
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{tree}: cluster-cli {' '.join(args)} failed ({os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def nodes_of(text: str) -> int:
    from cluster_cli import hostlist

    return sum(
        len(hostlist.expand(line.split(":", 1)[1].strip()))
        for line in text.splitlines()
        if line.startswith("    nodes: ")
    )


def profile(text: str) -> None:
    from cluster_cli.loader import load_cluster
    from cluster_cli.render import render_configs
    from cluster_cli.render.ansible_inventory import render_ansible_inventory

    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "inventory.yaml"
        path.write_text(text)
        profiler = cProfile.Profile()
        profiler.enable()
        cluster = load_cluster(path)
        render_configs(cluster, "benchmarkPassword0123456789")
        render_ansible_inventory(cluster)
        profiler.disable()
    report = io.StringIO()
    pstats.Stats(profiler, stream=report).sort_stats("tottime").print_stats(25)
    print(report.getvalue())


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares seconds = a + b * nodes; (a, b)."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - b * mean_x, b


def section(trees: dict[str, Path], results: dict, facts: dict, runs: int, host: dict[str, str]) -> str:
    labels = list(trees)
    header = "| shape | nodes | verb | " + " | ".join(
        f"{label}: wall | {label}: CPU | {label}: peak RSS" for label in labels
    ) + " |"
    lines = [
        HEADING,
        "",
        (
            f"`python benchmarks/render_scale.py` (median of {runs} runs, each a fresh "
            "`python -m cluster_cli VERB` process timed from outside: wall clock, the child's CPU time "
            "(user + system) and its peak RSS; `render` writes every file into a build directory, "
            "secrets included). Shapes: render_10k.py's 4 groups; groups of 512 nodes with a 3-level tree "
            "(leaves of 64 nodes, 16 leaves a spine, a core), HA controllers, two login hosts and four "
            "overlapping partitions (all, GPU groups, every other group, hostlist slices); the same with "
            "groups of 32 nodes."
            + (" `before` is the tree given with `--before`, run interleaved with `after` (this tree)." if len(labels) > 1 else "")
        ),
        "",
        header,
        "|---|---|---|" + "---|---|---|" * len(labels),
    ]
    lines.append(
        "| start-up | - | `--version` | " + " | ".join(results[label]["version"].cell() for label in labels) + " |"
    )
    for shape in facts:
        for verb in ("validate", "render"):
            cells = " | ".join(results[label][(shape, verb)].cell() for label in labels)
            lines.append(f"| {shape} | {facts[shape]['nodes']:,} | `{verb}` | {cells} |")
    lines.append("")
    last = labels[-1]
    at_10k = {shape: statistics.median(results[last][(shape, "render")].wall) for shape in ("4-groups-10k", "groups-19", "small-304")}
    cpu_10k = {shape: statistics.median(results[last][(shape, "render")].cpu) for shape in at_10k}
    worst = max(at_10k, key=at_10k.__getitem__)
    verdict = "meets" if max(at_10k.values()) <= GOAL_SECONDS else "misses"
    worst_walls = results[last][(worst, "render")].wall  # how thin the margin is, not only the median
    over = sum(wall > GOAL_SECONDS for wall in worst_walls)
    lines += [
        (
            f"Goal <= {GOAL_SECONDS} s for `render` of ~10,000 nodes of any shape, start-up included: `{last}` "
            f"**{verdict}** it in wall-clock median (slowest shape {worst}: {at_10k[worst]:.2f} s wall, "
            f"{cpu_10k[worst]:.2f} s CPU; {over} of its {len(worst_walls)} runs over {GOAL_SECONDS} s, "
            f"{min(worst_walls):.2f}-{max(worst_walls):.2f} s)."
        ),
        "",
        "Growth: CPU time fitted as fixed + per node between the two sizes of each shape (a fixed part below "
        "zero: faster than linear growth):",
        "",
        "| shape | verb | " + " | ".join(f"{label}: fixed | {label}: per node" for label in labels) + " |",
        "|---|---|" + "---|---|" * len(labels),
    ]
    for family, (small, large) in FAMILIES.items():
        for verb in ("validate", "render"):
            fits = []
            for label in labels:
                points = [(facts[s]["nodes"], statistics.median(results[label][(s, verb)].cpu)) for s in (small, large)]
                fixed, per_node = fit(points)
                fits.append(f"{fixed:.2f} s | {per_node * 1e6:.1f} µs")
            lines.append(f"| {family} | `{verb}` | " + " | ".join(fits) + " |")
    lines += ["", FINDINGS, "", render_10k.machine_line(host, "at the end"), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per point (median is reported)")
    parser.add_argument("--before", type=Path, help="a checkout to time too, interleaved (labelled 'before')")
    parser.add_argument("--only", action="append", choices=list(SHAPES), help="only these shapes (repeatable)")
    parser.add_argument("--no-write", action="store_true", help="print the results, leave docs/benchmarks.md alone")
    parser.add_argument("--profile", action="store_true", help="cProfile one in-process load+render per shape")
    options = parser.parse_args(argv)
    shapes = options.only or list(SHAPES)
    texts = {shape: SHAPES[shape]() for shape in shapes}
    if options.profile:
        for shape, text in texts.items():
            print(f"== {shape}")
            profile(text)
        return 0

    trees = {"before": options.before.resolve()} if options.before else {}
    trees["after"] = REPO
    facts = {shape: {"nodes": nodes_of(text)} for shape, text in texts.items()}
    results: dict[str, dict] = {label: {"version": Runs()} for label in trees}
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        paths = {}
        for shape, text in texts.items():
            paths[shape] = root / f"{shape}.yaml"
            paths[shape].write_text(text)
        for tree in trees.values():  # a first run compiles the byte code, as installing does
            run_cli(tree, ["render", str(paths[shapes[0]]), "-o", str(root / "warm-up")], root / "state")
        for _ in range(options.runs):  # interleaved: changing load affects every point alike
            for label, tree in trees.items():
                results[label]["version"].add(*run_cli(tree, ["--version"], root / "state"))
                for shape in shapes:
                    for verb, extra in (("validate", ["-q"]), ("render", ["-o", str(root / f"build-{label}-{shape}")])):
                        runs = results[label].setdefault((shape, verb), Runs())
                        runs.add(*run_cli(tree, [verb, str(paths[shape]), *extra], root / "state"))
            print(".", end="", flush=True, file=sys.stderr)
    print(file=sys.stderr)
    host = render_10k.machine()
    host["load"] = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    if not all(pair[0] in shapes and pair[1] in shapes for pair in FAMILIES.values()):
        for label in trees:
            for shape in shapes:
                print(label, shape, facts[shape]["nodes"], results[label][(shape, "render")].cell())
        return 0
    text = section(trees, results, facts, options.runs, host)
    print(text)
    if not options.no_write:
        render_10k.write_section(text, HEADING)
        print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
