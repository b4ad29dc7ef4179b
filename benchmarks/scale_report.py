"""The "Deploy at scale" section of docs/benchmarks.md from benchmarks/deploy_scale.py's runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scale_model import Fit, Projection, fit_line, project

from cluster_cli.ansible.forks import sized_forks
from devtools.markdown import replace_section
import itertools

BENCHMARKS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SECTION = "## Deploy at scale: cost per compute host (test bed)"
STEPS = ("first install", "no-op (plan short path)", "no-op --full")
PROJECT_TO = (1_000, 10_000)
CONTROL_CORES = 16  # the control node
# issue 17 item 3: control-node CPU per compute host, and the 1,000-host first install's wall
CPU_TARGETS = {"first install": 3.0, "no-op (plan short path)": 1.0, "no-op --full": 1.0}
WALL_TARGET_S = 20 * 60
TOP = 10


def step_of(run: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((step for step in run["steps"] if step["step"] == name and step["returncode"] == 0), None)


def cpu_of(step: dict[str, Any]) -> float:
    return float(step["cpu_user_s"] + step["cpu_sys_s"])


def fits(runs: list[dict[str, Any]], name: str) -> dict[str, Fit] | None:
    """CPU, main-process CPU and wall fitted over the runs where step ``name`` succeeded."""
    points = [(run["computes"], step) for run in runs if (step := step_of(run, name))]
    if len({hosts for hosts, _ in points}) < 2:
        return None
    hosts = [count for count, _ in points]
    return {
        "cpu": fit_line(hosts, [cpu_of(step) for _, step in points]),
        "main": fit_line(hosts, [float(step["main_cpu_s"]) for _, step in points]),
        "ssh": fit_line(hosts, [float(step.get("ssh_master_cpu_s", 0.0)) for _, step in points]),
        "wall": fit_line(hosts, [float(step["wall_s"]) for _, step in points]),
    }


def marginal(runs: list[dict[str, Any]], name: str) -> list[float]:
    """CPU-s per added compute host between successive host counts: a straight line keeps them equal."""
    points = [(run["computes"], cpu_of(step)) for run in runs if (step := step_of(run, name))]
    return [(cost - before) / (hosts - fewer) for (fewer, before), (hosts, cost) in itertools.pairwise(points)
            if hosts != fewer]


def chain_seconds(runs: list[dict[str, Any]], name: str) -> float:
    """One compute host's task time in the least loaded run (the fewest hosts) of step ``name``."""
    for run in runs:
        step = step_of(run, name)
        profile = step.get("profile") if step else None
        if profile and profile.get("compute_hosts"):
            return float(profile["compute_host_seconds"]) / int(profile["compute_hosts"])
    return 0.0


def projections(runs: list[dict[str, Any]], name: str, forks: int) -> list[Projection]:
    fitted = fits(runs, name)
    if fitted is None:
        return []
    chain = chain_seconds(runs, name)
    return [project(hosts, fitted["cpu"], fitted["main"], chain, forks, CONTROL_CORES) for hosts in PROJECT_TO]


def _cell(step: dict[str, Any] | None, main: bool = True) -> str:
    if step is None:
        return "-"
    text = f"{step['wall_s']:.1f} s / {cpu_of(step):.1f}"
    text += f" ({step['main_cpu_s']:.1f})" if main and step["main_cpu_s"] else ""
    return text + f" + {step.get('ssh_master_cpu_s', 0.0):.1f}"


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def runs_table(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| compute hosts | bed up | first install | no-op, plan short path | no-op, --full | changed (first, --full) | load at the first deploy |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        first, short, full = (step_of(run, name) for name in STEPS)
        changed = f"{first['changed'] if first else '-'}, {full['changed'] if full else '-'}"
        load = run["steps"][0]["load"] if run["steps"] else "-"
        lines.append(f"| {run['computes']} | {run['up_s']:.0f} s | {_cell(first)} | {_cell(short)} | "
                     f"{_cell(full)} | {changed} | {load} |")
    return lines


def fit_table(runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| deploy | CPU-s fixed | CPU-s per compute host | between successive runs | of which main process | ssh masters per host | wall fixed | wall per host (this bed) | target CPU-s per host |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in STEPS:
        fitted = fits(runs, name)
        if fitted is None:
            continue
        cpu, main, wall = fitted["cpu"], fitted["main"], fitted["wall"]
        verdict = "met" if cpu.per_host <= CPU_TARGETS[name] else "not met"
        steps = ", ".join(f"{value:.2f}" for value in marginal(runs, name))
        lines.append(f"| {name} | {cpu.fixed:.1f} | {cpu.per_host:.2f} | {steps} | {main.per_host:.2f} | "
                     f"{fitted['ssh'].per_host:.2f} | {wall.fixed:.1f} s | "
                     f"{wall.per_host:.2f} s | <= {CPU_TARGETS[name]:g}: {verdict} |")
    return lines


def projection_table(runs: list[dict[str, Any]], forks: int) -> list[str]:
    lines = [
        "| deploy | compute hosts | control-node CPU | projected wall | decided by | main process | CPU / cores | host chain |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in STEPS:
        for item in projections(runs, name, forks):
            lines.append(f"| {name} | {item.hosts:,} | {item.cpu_s / 3600:.2f} CPU-h | {_duration(item.wall_s)} | "
                         f"{item.bound} | {_duration(item.main_s)} | {_duration(item.spread_s)} | {_duration(item.chain_s)} |")
    return lines


def wall_verdict(runs: list[dict[str, Any]], forks: int) -> str:
    """The 1,000-host first install against its wall-time target."""
    first = next((item for item in projections(runs, STEPS[0], forks) if item.hosts == PROJECT_TO[0]), None)
    if first is None:
        return "1,000-host first install: no fit (fewer than two host counts)."
    verdict = "met" if first.wall_s <= WALL_TARGET_S else "not met"
    return (f"1,000-host first install, projected: {_duration(first.wall_s)} ({first.bound}) against "
            f"<= {WALL_TARGET_S // 60} min: {verdict}.")


def task_counts(runs: list[dict[str, Any]]) -> list[str]:
    """Host-task results per compute host and what one costs, from each deploy's CPU slope."""
    lines = []
    for name in (STEPS[0], STEPS[2]):
        fitted = fits(runs, name)
        step = step_of(runs[0], name)  # the least loaded run: a host's own time, the least queueing
        profile = step.get("profile") if step else None
        if not fitted or not profile or not profile.get("compute_results"):
            continue
        per_host = profile["compute_results"] / profile["compute_hosts"]
        skipped = profile["compute_skipped"] / profile["compute_hosts"]
        lines.append(f"- {name}: {per_host:.0f} task results per compute host ({skipped:.0f} of them skipped), "
                     f"{fitted['cpu'].per_host / per_host:.3f} control-node CPU-s per host and task "
                     f"({profile['compute_host_seconds'] / profile['compute_results']:.2f} s of a host's time).")
    return lines


def plays_table(run: dict[str, Any]) -> list[str]:
    lines = ["| play | first install | no-op --full |", "|---|---|---|"]
    first, full = step_of(run, STEPS[0]), step_of(run, STEPS[2])
    hosts = run["computes"]
    plays = list((first or {}).get("profile", {}).get("plays", {}))
    for play in plays:
        cells = [f"{step['profile']['plays'].get(play, 0.0) / hosts:.1f} s" if step else "-" for step in (first, full)]
        lines.append(f"| {play} | {cells[0]} | {cells[1]} |")
    return lines


def top_table(step: dict[str, Any] | None, hosts: int, count: int = TOP) -> list[str]:
    if not step or not step.get("profile"):
        return ["(no profile)"]
    lines = ["| task (play) | host-seconds | per compute host | changed / skipped of runs |", "|---|---|---|---|"]
    for cost in step["profile"]["top"][:count]:
        lines.append(f"| {cost['task']} ({cost['play']}) | {cost['host_seconds']:.1f} | "
                     f"{cost['host_seconds'] / hosts:.2f} s | {cost['changed']} / {cost['skipped']} of {cost['runs']} |")
    return lines


def section(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return f"{SECTION}\n\nNo runs.\n"
    settings = runs[-1]["settings"]
    # What cluster-cli gives ansible-playbook on the control node (memory not the limit).
    forks = sized_forks(PROJECT_TO[0], CONTROL_CORES, None)
    # Host-seconds grow with the bed, every host's work sharing the same cores: the smallest run
    # (the least loaded) shows what a task costs a host, the others mostly the queueing.
    smallest = runs[0]
    lines = [
        SECTION,
        "",
        "`flock /tmp/cluster-heavy.lock .venv/bin/python benchmarks/deploy_scale.py run --computes N` for each N, "
        "then `benchmarks/deploy_scale.py report --write`. The test bed `scale`: `ctl` (slurmctld, slurmdbd, "
        "MariaDB) and N compute hosts (one slurmd, one fake GPU each), no login host, no torch wheel. A cell is "
        "wall / control-node CPU-s (the whole cluster-cli + ansible-playbook tree, user + sys; in brackets the "
        "main ansible-playbook process alone) + the CPU-s of the ssh ControlPersist masters, which detach from "
        "the tree and are counted apart. A fresh bed for each N.",
        "",
        f"Ansible: forks {settings['forks']} (of the largest run), strategy {settings['strategy']}, gathering "
        f"{settings['gathering']}, pipelining {settings['pipelining']}, ssh_args `{settings['ssh_args']}`.",
        "",
        *runs_table(runs),
        "",
        "Fit, cost = fixed + per host x compute hosts (least squares over the runs):",
        "",
        *fit_table(runs),
        "",
        f"Projection at forks {forks} (cluster_cli.ansible.forks on a {CONTROL_CORES}-core control node) on that node: the longest of the main process's "
        f"CPU (single-threaded, in series), the tree's CPU over min(cores, forks) cores, and one compute host's "
        f"task chain (its host-seconds in the smallest run) times ceil(hosts / forks). Target: 1,000-host first "
        f"install <= {WALL_TARGET_S // 60} min.",
        "",
        *projection_table(runs, forks),
        "",
        wall_verdict(runs, forks),
        "",
        *task_counts(runs),
        "",
        f"Per play, host-seconds per compute host (the smallest run, {smallest['computes']} compute hosts; a "
        "larger bed's hosts queue for the same cores, their times grow with it):",
        "",
        *plays_table(smallest),
        "",
        f"Top {TOP} tasks on the compute hosts by host-seconds, first install ({smallest['computes']} compute hosts):",
        "",
        *top_table(step_of(smallest, STEPS[0]), smallest["computes"]),
        "",
        f"Top {TOP} tasks on the compute hosts, no-op --full ({smallest['computes']} compute hosts):",
        "",
        *top_table(step_of(smallest, STEPS[2]), smallest["computes"]),
        "",
        *[f"Machine (N={run['computes']}): {run['machine']}." for run in runs],
        "",
    ]
    return "\n".join(lines)


def write(text: str) -> None:
    BENCHMARKS.write_text(replace_section(BENCHMARKS.read_text(), text))
