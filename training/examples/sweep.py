"""Hyperparameter sweep over a Slurm job array, standard library only (copy it next to train.py).

  python3 sweep.py count SPACE.toml            number of tasks N (submit with --array=0-(N-1))
  python3 sweep.py args SPACE.toml INDEX       train.py's arguments for task INDEX, one per line:
      mapfile -t args < <(python3 sweep.py args sweep.toml "$SLURM_ARRAY_TASK_ID")
  python3 sweep.py collect SPACE.toml RUN_DIR  rank the tasks; write RUN_DIR/results.csv and .md

collect reads RUN_DIR/task-<INDEX>/task.json (written when the task starts: index, job, log,
args), metrics.json (written by train.py) and exit-code (train.py's exit status), and the
optional RUN_DIR/sweep.json ({"log_pattern": ".../sweep-1234_{index}.out"}).
Exit status: 0 success (collect: every task ok), 1 collect found failed or missing tasks,
2 bad input (a bad space file is reported as FILE:LINE: message).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import os
import random
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

Value = int | float | str | bool
SWEEP_KEYS = ("method", "metric", "goal", "samples", "seed")
USAGE = "usage: sweep.py count SPACE.toml | args SPACE.toml INDEX | collect SPACE.toml RUN_DIR"
HEADER = re.compile(r"\[+([\w.\-\"' ]+)\]+\s*(?:#.*)?$")  # a [table] line, not a line of an array


class SweepError(Exception):
    """Bad input; main prints the message and exits with status 2."""


@dataclass
class Range:
    low: float
    high: float
    scale: str  # "linear" or "log"
    integer: bool


@dataclass
class Space:
    method: str
    metric: str
    goal: str
    samples: int
    seed: int
    params: dict[str, list[Value] | Range]


# ---------------------------------------------------------------- reading the space file


@dataclass
class Checker:
    """Raises the errors of a space file, each at the line of the key it is about."""

    name: str
    lines: list[str]

    def fail(self, message: str, *path: str) -> NoReturn:
        raise SweepError(f"{self.name}:{self.line_of(*path)}: {message}")

    def param(self, name: str, message: str, *key: str) -> NoReturn:
        self.fail(f"[parameters] {name}: {message}", "parameters", name, *key)

    def line_of(self, *path: str) -> int:
        """The line of the key at path ("parameters", "lr", "min"): its `key =` line in its table or
        its own [table] header; else, going up, the line of its table (tomllib gives no lines)."""
        while path:
            table, key, current = ".".join(path[:-1]), path[-1], ""
            assign = re.compile(rf"""["']?{re.escape(key)}["']?\s*[=.]""")
            for number, line in enumerate(self.lines, 1):
                header = HEADER.match(line.strip())
                if header:
                    current = re.sub(r"[\s\"']", "", header.group(1))
                    if current == ".".join(path):
                        return number
                elif current == table and assign.match(line.strip()):
                    return number
            path = path[:-1]
        return 1


def load_space(name: str) -> Space:
    try:
        text = Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SweepError(f"{name}: cannot read: {error}") from None
    check = Checker(name, text.splitlines())
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # Python 3.11's messages end "(at line L, column C)" or "(at end of document)".
        where = re.search(r"\(at line (\d+), column (\d+)\)$", str(error))
        line = int(where.group(1)) if where else max(len(check.lines), 1)
        message = str(error).split(" (at ")[0] + (f" (column {where.group(2)})" if where else "")
        raise SweepError(f"{name}:{line}: TOML syntax error: {message}") from None
    for key in doc:
        if key not in ("sweep", "parameters"):
            check.fail(f"unknown table {key!r} (expected [sweep] and [parameters])", key)
    for key in ("sweep", "parameters"):
        if not isinstance(doc.get(key), dict):
            check.fail(f"{key} must be a [{key}] table" if key in doc else f"missing [{key}] table", key)
    space = read_sweep(check, doc["sweep"])
    space.params = read_params(check, doc["parameters"], space.method)
    return space


def read_sweep(check: Checker, sweep: dict[str, Any]) -> Space:
    for key in sweep:
        if key not in SWEEP_KEYS:
            check.fail(f"[sweep] unknown key {key!r} (expected one of {', '.join(SWEEP_KEYS)})", "sweep", key)
    values: list[Any] = [sweep.get(key) for key in SWEEP_KEYS]
    method, metric, goal, samples, seed = values
    rules = [  # in this order: a later rule assumes the earlier ones hold
        ("method", method in ("grid", "random"), 'must be "grid" or "random"'),
        ("metric", isinstance(metric, str) and metric != "", "must be a metrics.json key (a string)"),
        ("goal", goal in ("min", "max"), 'must be "min" or "max"'),
        ("samples", method == "random" or samples is None, 'is for method = "random" only'),
        ("seed", method == "random" or seed is None, 'is for method = "random" only'),
        ("samples", method == "grid" or (is_int(samples) and samples >= 1), "must be an integer >= 1"),
        ("seed", seed is None or is_int(seed), "must be an integer"),
    ]
    for key, ok, message in rules:
        if not ok:
            check.fail(f"[sweep] {key} {message} ({given(sweep, key)})", "sweep", key)
    return Space(method, metric, goal, samples or 0, seed or 0, {})


def read_params(check: Checker, table: dict[str, Any], method: str) -> dict[str, list[Value] | Range]:
    if not table:
        check.fail("[parameters] is empty: give at least one parameter", "parameters")
    params: dict[str, list[Value] | Range] = {}
    for name, spec in table.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            check.fail(f"[parameters] {name!r}: a name must match [a-z][a-z0-9_]*", "parameters", name)
        if isinstance(spec, dict) and method == "random":
            params[name] = read_range(check, name, spec)
            continue
        if isinstance(spec, dict):
            check.param(name, 'a range needs method = "random" (grid takes lists)')
        if not isinstance(spec, list) or not spec:
            check.param(name, f"must be a non-empty list or a range ({given(table, name)})")
        for value in spec:
            if not isinstance(value, (int, float, str, bool)) or "\n" in str(value):  # args: one per line
                check.param(name, f"{value!r} is not a number, a one-line string or a boolean")
        params[name] = spec
    return params


def read_range(check: Checker, name: str, spec: dict[str, Any]) -> Range:
    for key in spec:
        if key not in ("min", "max", "scale"):
            check.param(name, f"unknown key {key!r} in the range (expected min, max, scale)", key)
    low: Any = spec.get("min")
    high: Any = spec.get("max")
    scale = spec.get("scale", "linear")
    for key, value in (("min", low), ("max", high)):
        if not is_number(value) or not math.isfinite(value):
            check.param(name, f"{key} must be a finite number ({given(spec, key)})", key)
    if low >= high:
        check.param(name, f"min ({low}) must be less than max ({high})", "min")
    if scale not in ("linear", "log"):
        check.param(name, f'scale must be "linear" or "log" (got {scale!r})', "scale")
    if scale == "log" and low <= 0:
        check.param(name, f"log scale needs min > 0 (got {low})", "min")
    return Range(low, high, scale, integer=scale == "linear" and is_int(low) and is_int(high))


def given(table: dict[str, Any], key: str) -> str:
    return f"got {table[key]!r}" if key in table else "missing"


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---------------------------------------------------------------- the tasks


def count(space: Space) -> int:
    if space.method == "random":
        return space.samples
    return math.prod(len(values) for values in space.params.values() if isinstance(values, list))


def tasks(space: Space) -> Iterator[dict[str, Value]]:
    """Every task's parameters in index order; task i depends only on the space file and i."""
    if space.method == "grid":
        lists = [values for values in space.params.values() if isinstance(values, list)]
        yield from (dict(zip(space.params, values, strict=True)) for values in itertools.product(*lists))
        return
    rng = random.Random(space.seed)
    for _ in range(space.samples):
        yield {name: draw(rng, spec) for name, spec in space.params.items()}


def draw(rng: random.Random, spec: list[Value] | Range) -> Value:
    if isinstance(spec, list):
        return rng.choice(spec)
    if spec.integer:
        return rng.randint(int(spec.low), int(spec.high))
    if spec.scale == "log":
        value = math.exp(rng.uniform(math.log(spec.low), math.log(spec.high)))
    else:
        value = rng.uniform(spec.low, spec.high)
    # Six significant digits (kept within [min, max]), so the arguments, table and CSV show the value used.
    return float(min(max(float(format(value, ".6g")), spec.low), spec.high))


def task_args(space: Space, index: int) -> list[str]:
    params = next(itertools.islice(tasks(space), index, None))
    return [text for name, value in params.items() for text in (flag(name), arg_text(value))]


def arg_text(value: Value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):  # 6 significant digits (1e+06, not 1000000.0) unless that loses digits
        short = format(value, ".6g")
        short += ".0" if short.lstrip("-").isdigit() else ""  # a float stays a float: 1.0, not 1
        return short if float(short) == value else repr(value)
    return str(value)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# ---------------------------------------------------------------- collecting the results


@dataclass
class Result:
    index: int
    params: dict[str, str]
    log: str
    status: str = "missing"
    reason: str = ""
    metric: float | None = None


def read_json(path: Path) -> Any:
    """The file's JSON, None if it does not exist; ValueError if it cannot be read or parsed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ValueError(str(error)) from None


def read_task(folder: Path, result: Result, metric: str) -> None:
    """Fills in a started task (one with a task.json); a task that never started stays missing."""
    if not (folder / "task.json").exists():
        return
    result.status, result.reason = "failed", "task.json unreadable"
    try:
        started = read_json(folder / "task.json")
    except ValueError:
        return
    if not isinstance(started, dict):
        return
    result.log = started["log"] if isinstance(started.get("log"), str) else result.log
    args = started.get("args")
    if isinstance(args, list) and all(isinstance(arg, str) for arg in args):
        names = {flag(name): name for name in result.params}
        for option, value in itertools.pairwise(args):
            if option in names:
                result.params[names[option]] = value
    result.metric, result.reason = outcome(folder, metric)
    result.status = "ok" if result.metric is not None else "failed"


def outcome(folder: Path, metric: str) -> tuple[float | None, str]:
    """(the metric, "") for a task that succeeded, else (None, why it failed)."""
    try:
        code = (folder / "exit-code").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        # still running, or Slurm ended it before the batch script could write one
        return None, "no exit code: running or killed"
    except (OSError, ValueError):
        return None, "exit-code unreadable"
    if code != "0":
        return None, f"exit {code}" if code.lstrip("-").isdigit() else "exit-code unreadable"
    try:
        metrics = read_json(folder / "metrics.json")
    except ValueError:
        return None, "metrics.json unreadable"
    if metrics is None:
        return None, "no metrics.json"
    value = metrics.get(metric) if isinstance(metrics, dict) else None
    if value is None:
        return None, f"metric {metric} missing"
    if not is_number(value) or not math.isfinite(value):
        return None, f"metric {metric} not a finite number ({value!r})"
    return float(value), ""


def collect_results(space: Space, run_dir: Path) -> list[Result]:
    """Every task's result: ok best first (ties by index), then failed, then missing."""
    try:
        job = read_json(run_dir / "sweep.json")
    except ValueError:
        job = None
    pattern = job.get("log_pattern") if isinstance(job, dict) else None
    results = []
    for index, params in enumerate(tasks(space)):
        log = pattern.replace("{index}", str(index)) if isinstance(pattern, str) else ""
        result = Result(index, {name: arg_text(value) for name, value in params.items()}, log)
        read_task(run_dir / f"task-{index}", result, space.metric)
        results.append(result)
    sign = 1 if space.goal == "min" else -1
    ok = sorted((r for r in results if r.metric is not None), key=lambda r: (sign * (r.metric or 0), r.index))
    return ok + [r for r in results if r.status == "failed"] + [r for r in results if r.status == "missing"]


def table(space: Space, results: list[Result]) -> list[list[str]]:
    """The header and a row per task; "" where a cell has no value."""
    rows = [["rank", "task", *space.params, space.metric, "status", "reason", "log"]]
    for rank, r in enumerate(results, 1):  # the ok results come first
        rank_text, metric = ("", "") if r.metric is None else (str(rank), format(r.metric, ".6g"))
        rows.append([rank_text, str(r.index), *r.params.values(), metric, r.status, r.reason, r.log])
    return rows


def summary(space: Space, results: list[Result]) -> str:
    counts = {status: sum(r.status == status for r in results) for status in ("ok", "failed", "missing")}
    line = f"{len(results)} tasks: " + ", ".join(f"{n} {status}" for status, n in counts.items())
    best = results[0]  # ranked first: the best ok task, if any
    if best.metric is None:
        return line + "; best: none"
    args = " ".join(f"{flag(name)} {value}" for name, value in best.params.items())
    return line + f"; best: task {best.index} {space.metric}={best.metric:.6g} ({args})"


def write_atomic(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never part of one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except OSError as error:
        temp.unlink(missing_ok=True)
        raise SweepError(f"{path}: cannot write: {error}") from None


def collect(space: Space, run_dir: Path) -> int:
    if not run_dir.is_dir():
        problem = "is not a directory" if run_dir.exists() else "does not exist"
        raise SweepError(f"{run_dir}: the sweep's RUN_DIR {problem}")
    results = collect_results(space, run_dir)
    rows, last_line = table(space, results), summary(space, results)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    write_atomic(run_dir / "results.csv", out.getvalue())
    marked = [[cell.replace("|", "\\|") or "-" for cell in row] for row in rows]
    markdown = ["| " + " | ".join(row) + " |" for row in [marked[0], ["---"] * len(rows[0]), *marked[1:]]]
    write_atomic(run_dir / "results.md", "\n".join([*markdown, "", last_line, ""]))
    shown = [[cell or "-" for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in shown) for column in range(len(rows[0]))]
    for row in shown:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(f"\n{last_line}")
    return 0 if all(r.status == "ok" for r in results) else 1


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    try:
        match sys.argv[1:] if argv is None else argv:
            case ["count", name]:
                print(count(load_space(name)))
            case ["args", name, index] if re.fullmatch("[0-9]+", index):
                space = load_space(name)
                if int(index) >= count(space):
                    raise SweepError(f"{name}: task index {index} out of range 0-{count(space) - 1}")
                print("\n".join(task_args(space, int(index))))
            case ["collect", name, run_dir]:
                return collect(load_space(name), Path(run_dir))
            case _:
                raise SweepError(USAGE)
    except SweepError as error:
        print(error, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
