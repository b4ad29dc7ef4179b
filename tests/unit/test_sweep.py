"""training/examples/sweep.py: the tasks of a sweep, its errors on bad space files, and collect."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from unit_helpers import module_from_file

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "training" / "examples" / "sweep.py"
SHIPPED = REPO / "training" / "examples" / "sweep.toml"


sweep: Any = module_from_file("sweep", SCRIPT)

HEAD = '[sweep]\nmethod = "{method}"\nmetric = "val_loss"\ngoal = "{goal}"\n'
RANDOM_SPACE = """\
[sweep]
method = "random"
metric = "accuracy"
goal = "max"
samples = 200
seed = 7

[parameters]
lr = {min = 1e-4, max = 1e-1, scale = "log"}
layers = {min = 1, max = 8}
dropout = {min = 0, max = 0.5}
width = {min = 16, max = 256, scale = "log"}
optimizer = ["sgd", "adam"]
"""


GRID = HEAD.format(method="grid", goal="min")
RANDOM = HEAD.format(method="random", goal="min") + "samples = 4\n"


def grid_with(params: str) -> str:
    return f"{GRID}[parameters]\n{params}\n"


def random_with(params: str) -> str:
    return f"{RANDOM}[parameters]\n{params}\n"


def sweep_without(line: str, params: str = "lr = [1]") -> str:
    return GRID.replace(line, "") + f"[parameters]\n{params}\n"


def write(tmp_path: Path, text: str, name: str = "space.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def grid(tmp_path: Path, goal: str = "min") -> str:
    """10 tasks: task i has lr = [0.1 .. 0.5][i // 2] and batch_size = [16, 32][i % 2]."""
    params = "[parameters]\nlr = [0.1, 0.2, 0.3, 0.4, 0.5]\nbatch_size = [16, 32]\n"
    return write(tmp_path, HEAD.format(method="grid", goal=goal) + params, f"grid-{goal}.toml")


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = sweep.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------- count and args


def test_the_shipped_grid_is_the_product_of_its_lists_first_parameter_slowest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_main(capsys, "count", str(SHIPPED)) == (0, "8\n", "")
    expected = list(itertools.product(["0.01", "0.03", "0.1", "0.3"], ["32", "64"]))
    for index, (lr, hidden) in enumerate(expected):
        code, out, err = run_main(capsys, "args", str(SHIPPED), str(index))
        assert (code, err) == (0, "")
        assert out.splitlines() == ["--lr", lr, "--hidden", hidden]


def test_args_spell_flags_with_hyphens_and_values_as_train_py_reads_them(tmp_path: Path) -> None:
    params = 'weight_decay = [1e-5]\nuse_amp = [true]\nmodel = ["resnet 50"]\nsteps = [200]\nscale = [1.0]\n'
    floats = "big = [1e6]\nprecise = [0.1234567]\nnegative = [-2.0]"
    space = sweep.load_space(write(tmp_path, grid_with(params + floats)))
    assert sweep.count(space) == 1
    assert sweep.task_args(space, 0) == [
        "--weight-decay", "1e-05", "--use-amp", "true", "--model", "resnet 50", "--steps", "200",
        "--scale", "1.0", "--big", "1e+06", "--precise", "0.1234567", "--negative", "-2.0",
    ]


def test_random_draws_are_reproducible_in_range_and_typed(tmp_path: Path) -> None:
    space = sweep.load_space(write(tmp_path, RANDOM_SPACE))
    drawn = list(sweep.tasks(space))
    assert sweep.count(space) == len(drawn) == 200
    assert drawn == list(sweep.tasks(sweep.load_space(write(tmp_path, RANDOM_SPACE, "again.toml"))))
    assert drawn != list(sweep.tasks(sweep.load_space(write(tmp_path, RANDOM_SPACE.replace("seed = 7", "")))))
    for task in drawn:
        assert isinstance(task["lr"], float) and 1e-4 <= task["lr"] <= 1e-1
        assert type(task["layers"]) is int and 1 <= task["layers"] <= 8
        assert isinstance(task["dropout"], float) and 0 <= task["dropout"] <= 0.5
        assert isinstance(task["width"], float) and 16 <= task["width"] <= 256  # log scale: not an int
        assert task["optimizer"] in ("sgd", "adam")
        assert float(format(task["lr"], ".6g")) == task["lr"]
    # Log scale: each decade of 1e-4..1e-1 gets about a third of the draws (linear: 0.9 % below 1e-3).
    assert 40 <= sum(task["lr"] < 1e-3 for task in drawn) <= 95
    assert {task["layers"] for task in drawn} == set(range(1, 9))


def test_a_random_task_depends_only_on_the_file_and_its_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, RANDOM_SPACE)
    space = sweep.load_space(path)
    first = list(sweep.tasks(space))
    assert run_main(capsys, "args", path, "37")[1].splitlines() == sweep.task_args(space, 37)
    assert sweep.task_args(space, 37)[:2] == ["--lr", sweep.arg_text(first[37]["lr"])]
    fewer = sweep.load_space(
        write(tmp_path, RANDOM_SPACE.replace("samples = 200", "samples = 40"), "fewer.toml")
    )
    assert list(sweep.tasks(fewer)) == first[:40]


def test_the_command_line_as_a_batch_script_runs_it(tmp_path: Path) -> None:
    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, check=False
        )

    count, args, beyond = (
        cli("count", str(SHIPPED)),
        cli("args", str(SHIPPED), "7"),
        cli("args", str(SHIPPED), "8"),
    )
    assert (count.returncode, count.stdout, count.stderr) == (0, "8\n", "")
    assert (args.returncode, args.stdout, args.stderr) == (0, "--lr\n0.3\n--hidden\n64\n", "")
    assert (beyond.returncode, beyond.stdout) == (2, "")
    assert beyond.stderr == f"{SHIPPED}: task index 8 out of range 0-7\n"
    bad = cli("count", write(tmp_path, "[sweep]\nmethod = 'grid'\n"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.splitlines()) == 1


MALFORMED = [[], ["count"], ["args", "s"], ["args", "s", "-1"], ["args", "s", "x"], ["collect", "s"],
             ["x", "s"], ["args", "s", "\N{SUPERSCRIPT TWO}"]]


@pytest.mark.parametrize("argv", MALFORMED)
def test_a_malformed_command_line_prints_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(capsys, *argv) == (2, "", sweep.USAGE + "\n")


# ---------------------------------------------------------------- bad space files

NAME_RULE = "a name must match [a-z][a-z0-9_]*"
NOT_A_VALUE = "is not a number, a one-line string or a boolean"
BAD = [
    (grid_with("lr = [0.1,"), 6, "TOML syntax error: Invalid value"),  # "at end of document": the last line
    ('[sweep]\nmethod = "grid"\nmetric = \n', 3, "TOML syntax error: Invalid value (column 10)"),
    ("[parameters]\nlr = [1]\n", 1, "missing [sweep] table"),
    ("sweep = 1\n[parameters]\nlr = [1]\n", 1, "sweep must be a [sweep] table"),
    (GRID, 1, "missing [parameters] table"),
    (GRID + "\n[parameters]\n", 6, "[parameters] is empty: give at least one parameter"),
    (grid_with("lr = [1]\n[params]"), 7, "unknown table 'params' (expected [sweep] and [parameters])"),
    (GRID + "metirc = 'x'\n[parameters]\nlr = [1]\n", 5,
     "[sweep] unknown key 'metirc' (expected one of method, metric, goal, samples, seed)"),
    (grid_with("lr = [1]").replace('"grid"', '"bayes"'), 2,
     "[sweep] method must be \"grid\" or \"random\" (got 'bayes')"),
    (sweep_without('method = "grid"\n'), 1, '[sweep] method must be "grid" or "random" (missing)'),
    (grid_with("lr = [1]").replace('"min"', '"minimize"'), 4,
     "[sweep] goal must be \"min\" or \"max\" (got 'minimize')"),
    (sweep_without('goal = "min"\n'), 1, '[sweep] goal must be "min" or "max" (missing)'),
    (sweep_without('metric = "val_loss"\n'), 1,
     "[sweep] metric must be a metrics.json key (a string) (missing)"),
    (grid_with("lr = [1]").replace('"val_loss"', "1"), 3,
     "[sweep] metric must be a metrics.json key (a string) (got 1)"),
    (random_with("lr = [1]").replace("samples = 4\n", ""), 1,
     "[sweep] samples must be an integer >= 1 (missing)"),
    (random_with("lr = [1]").replace("4", "0"), 5, "[sweep] samples must be an integer >= 1 (got 0)"),
    (RANDOM + "seed = 1.5\n[parameters]\nlr = [1]\n", 6, "[sweep] seed must be an integer (got 1.5)"),
    (GRID + "samples = 4\n[parameters]\nlr = [1]\n", 5,
     '[sweep] samples is for method = "random" only (got 4)'),
    (GRID + "seed = 4\n[parameters]\nlr = [1]\n", 5, '[sweep] seed is for method = "random" only (got 4)'),
    (grid_with("lr = [1]\nLayers = [2]"), 7, f"[parameters] 'Layers': {NAME_RULE}"),
    (grid_with('"lr-max" = [1]'), 6, f"[parameters] 'lr-max': {NAME_RULE}"),
    (grid_with("lr = [1]\nhidden = []"), 7,
     "[parameters] hidden: must be a non-empty list or a range (got [])"),
    (grid_with("lr = 0.1"), 6, "[parameters] lr: must be a non-empty list or a range (got 0.1)"),
    (grid_with("lr = [0.1, [0.2]]"), 6, f"[parameters] lr: [0.2] {NOT_A_VALUE}"),
    (grid_with("lr = [{a = 1}]"), 6, f"[parameters] lr: {{'a': 1}} {NOT_A_VALUE}"),
    (grid_with('model = ["a\\nb"]'), 6, f"[parameters] model: 'a\\nb' {NOT_A_VALUE}"),
    (grid_with("lr = [1]\nwd = {min = 0, max = 1}"), 7,
     '[parameters] wd: a range needs method = "random" (grid takes lists)'),
    (random_with("lr = {min = 0.1, max = 0.1}"), 7, "[parameters] lr: min (0.1) must be less than max (0.1)"),
    (random_with("lr = {min = 1, max = 0}"), 7, "[parameters] lr: min (1) must be less than max (0)"),
    (random_with("lr = {max = 1}"), 7, "[parameters] lr: min must be a finite number (missing)"),
    (random_with("lr = {min = 0}"), 7, "[parameters] lr: max must be a finite number (missing)"),
    (random_with("lr = {min = 0, max = inf}"), 7, "[parameters] lr: max must be a finite number (got inf)"),
    (random_with("lr = {min = 0, max = '1'}"), 7, "[parameters] lr: max must be a finite number (got '1')"),
    (random_with("lr = {min = 0, max = 1, step = 0.1}"), 7,
     "[parameters] lr: unknown key 'step' in the range (expected min, max, scale)"),
    (random_with("lr = {min = 0, max = 1, scale = 'exp'}"), 7,
     "[parameters] lr: scale must be \"linear\" or \"log\" (got 'exp')"),
    (random_with("lr = {min = 0, max = 1, scale = 'log'}"), 7,
     "[parameters] lr: log scale needs min > 0 (got 0)"),
    (random_with("lr = {min = -1, max = 1, scale = 'log'}"), 7,
     "[parameters] lr: log scale needs min > 0 (got -1)"),
    (grid_with("lr = [\n  0.1,\n  0.2,\n]\nhidden = []").replace("[parameters]", "[parameters]  # space"), 10,
     "[parameters] hidden: must be a non-empty list or a range (got [])"),
    # A range written as its own table: the line of the offending field, else the table's header.
    (random_with("lr = [1]\n\n[parameters.wd]\nmin = 1\nmax = 0.5"), 10,
     "[parameters] wd: min (1) must be less than max (0.5)"),
    (random_with("lr = [1]\n\n[parameters.wd]\nmax = 0.5"), 9,
     "[parameters] wd: min must be a finite number (missing)"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD, ids=[message for _, _, message in BAD])
def test_a_bad_space_file_names_the_file_line_and_field(
    text: str, line: int, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, text, "sweep.toml")
    for command in (["count", path], ["args", path, "0"], ["collect", path, str(tmp_path)]):
        assert run_main(capsys, *command) == (2, "", f"{path}:{line}: {message}\n")
    assert sorted(tmp_path.iterdir()) == [tmp_path / "sweep.toml"]  # nothing written


def test_an_unreadable_space_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.toml")
    code, out, err = run_main(capsys, "count", missing)
    assert (code, out) == (2, "") and err.startswith(f"{missing}: cannot read: ")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe")
    code, out, err = run_main(capsys, "count", str(binary))
    assert (code, out) == (2, "") and err.startswith(f"{binary}: cannot read: ")


# ---------------------------------------------------------------- collect


def make_task(
    run: Path,
    index: int,
    args: list[str] | None = None,
    exit_code: int | None = None,
    metrics: dict[str, Any] | str | None = None,
) -> None:
    """A task folder as the batch script and train.py leave it."""
    folder = run / f"task-{index}"
    folder.mkdir(parents=True)
    log = f"/logs/{index}.out"
    (folder / "task.json").write_text(
        json.dumps({"index": index, "job": f"77_{index}", "log": log, "args": args})
    )
    if exit_code is not None:
        (folder / "exit-code").write_text(f"{exit_code}\n")
    if metrics is not None:
        (folder / "metrics.json").write_text(metrics if isinstance(metrics, str) else json.dumps(metrics))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """Tasks of grid(): 0-2 ok (1 and 2 tie), 3-7 failed five ways, 8-9 missing."""
    space = sweep.load_space(grid(tmp_path))
    run = tmp_path / "run"
    run.mkdir()
    (run / "sweep.json").write_text(json.dumps({"job": "77", "log_pattern": "/logs/{index}.out"}))
    ok = {"val_loss": 0.5, "train_loss": 0.4}
    make_task(run, 0, ["--lr", "0.10", "--batch-size", "16"], 0, ok)  # the args as the task ran: shown
    make_task(run, 1, sweep.task_args(space, 1), 0, {"val_loss": 0.123456789})
    make_task(run, 2, sweep.task_args(space, 2), 0, {"val_loss": 0.123456789})
    make_task(run, 3, sweep.task_args(space, 3), 1, ok)
    make_task(run, 4, sweep.task_args(space, 4))
    make_task(run, 5, sweep.task_args(space, 5), 0)
    make_task(run, 6, None, 0, {"train_loss": 0.3})  # no args: recomputed from the space file
    make_task(run, 7, sweep.task_args(space, 7), 0, '{"val_loss": NaN}')
    (run / "task-8").mkdir()  # the folder, but no task.json
    return run


FAILED_AND_MISSING = """\
,3,0.2,32,,failed,exit 1,/logs/3.out
,4,0.3,16,,failed,no exit code: running or killed,/logs/4.out
,5,0.3,32,,failed,no metrics.json,/logs/5.out
,6,0.4,16,,failed,metric val_loss missing,/logs/6.out
,7,0.4,32,,failed,metric val_loss not a finite number (nan),/logs/7.out
,8,0.5,16,,missing,,/logs/8.out
,9,0.5,32,,missing,,/logs/9.out
"""


def test_collect_ranks_ok_tasks_best_first_then_failed_then_missing(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "collect", grid(tmp_path), str(run))
    assert (code, err) == (1, "")
    assert (run / "results.csv").read_text() == (
        "rank,task,lr,batch_size,val_loss,status,reason,log\n"
        "1,1,0.1,32,0.123457,ok,,/logs/1.out\n"
        "2,2,0.2,16,0.123457,ok,,/logs/2.out\n"
        "3,0,0.10,16,0.5,ok,,/logs/0.out\n" + FAILED_AND_MISSING
    )
    summary = "10 tasks: 3 ok, 5 failed, 2 missing; best: task 1 val_loss=0.123457 (--lr 0.1 --batch-size 32)"
    assert (run / "results.md").read_text() == (
        "| rank | task | lr | batch_size | val_loss | status | reason | log |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- |\n"
        "| 1 | 1 | 0.1 | 32 | 0.123457 | ok | - | /logs/1.out |\n"
        "| 2 | 2 | 0.2 | 16 | 0.123457 | ok | - | /logs/2.out |\n"
        "| 3 | 0 | 0.10 | 16 | 0.5 | ok | - | /logs/0.out |\n"
        "| - | 3 | 0.2 | 32 | - | failed | exit 1 | /logs/3.out |\n"
        "| - | 4 | 0.3 | 16 | - | failed | no exit code: running or killed | /logs/4.out |\n"
        "| - | 5 | 0.3 | 32 | - | failed | no metrics.json | /logs/5.out |\n"
        "| - | 6 | 0.4 | 16 | - | failed | metric val_loss missing | /logs/6.out |\n"
        "| - | 7 | 0.4 | 32 | - | failed | metric val_loss not a finite number (nan) | /logs/7.out |\n"
        "| - | 8 | 0.5 | 16 | - | missing | - | /logs/8.out |\n"
        "| - | 9 | 0.5 | 32 | - | missing | - | /logs/9.out |\n"
        f"\n{summary}\n"
    )
    lines = out.splitlines()
    cells = [list(re.finditer(r"\S+(?: \S+)*", line)) for line in lines[:11]]  # cells: 2+ spaces apart
    texts = [[cell.group() for cell in row] for row in cells]
    assert texts[1] == ["1", "1", "0.1", "32", "0.123457", "ok", "-", "/logs/1.out"]
    ranks_and_tasks = [["1", "1"], ["2", "2"], ["3", "0"], *[["-", str(index)] for index in range(3, 10)]]
    assert [row[:2] for row in texts[1:]] == ranks_and_tasks
    columns = [cell.start() for cell in cells[0]]
    assert all([cell.start() for cell in row] == columns for row in cells)  # aligned
    assert lines[-2:] == ["", summary]
    written = sorted(path.name for path in run.iterdir() if path.is_file())
    assert written == ["results.csv", "results.md", "sweep.json"]  # no temporary files left


def test_collect_for_goal_max_ranks_the_largest_first(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(capsys, "collect", grid(tmp_path, "max"), str(run))[0] == 1
    csv_text = (run / "results.csv").read_text()
    assert csv_text.splitlines()[1:4] == [
        "1,0,0.10,16,0.5,ok,,/logs/0.out",
        "2,1,0.1,32,0.123457,ok,,/logs/1.out",
        "3,2,0.2,16,0.123457,ok,,/logs/2.out",
    ]
    assert csv_text.endswith(FAILED_AND_MISSING)


def test_collect_exits_0_when_every_task_is_ok_and_shows_no_log_without_sweep_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, GRID + "[parameters]\nlr = [0.1, 0.2]\n")
    run = tmp_path / "run"
    for index, loss in enumerate([0.3, 0.2]):
        make_task(run, index, ["--lr", f"0.{index + 1}"], 0, {"val_loss": loss, "steps": 200})
    code, out, _ = run_main(capsys, "collect", path, str(run))
    assert code == 0
    assert out.splitlines()[-1] == "2 tasks: 2 ok, 0 failed, 0 missing; best: task 1 val_loss=0.2 (--lr 0.2)"
    (run / "task-1" / "exit-code").unlink()
    (run / "task-0" / "exit-code").write_text("137\n")
    (run / "task-2").mkdir()
    code, out, _ = run_main(
        capsys, "collect", write(tmp_path, GRID + "[parameters]\nlr = [0.1, 0.2, 0.3]\n"), str(run)
    )
    assert code == 1 and out.splitlines()[-1] == "3 tasks: 0 ok, 2 failed, 1 missing; best: none"
    assert (run / "results.csv").read_text().splitlines()[1:] == [
        ",0,0.1,,failed,exit 137,/logs/0.out",
        ",1,0.2,,failed,no exit code: running or killed,/logs/1.out",
        ",2,0.3,,missing,,",
    ]


def test_collect_without_a_run_dir_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    absent = tmp_path / "runs" / "1234"
    message = f"{absent}: the sweep's RUN_DIR does not exist\n"
    assert run_main(capsys, "collect", str(SHIPPED), str(absent)) == (2, "", message)
    absent.parent.mkdir()
    absent.write_text("")
    message = f"{absent}: the sweep's RUN_DIR is not a directory\n"
    assert run_main(capsys, "collect", str(SHIPPED), str(absent)) == (2, "", message)
