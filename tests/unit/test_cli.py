"""The cluster-cli command: validate, render and schema, their exit codes (0 ok, 1 failed,
2 invalid inventory) and messages."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from unit_helpers import BASE, SHIPPED_INVENTORIES, edit, line_of

from cluster_cli import __version__
from cluster_cli.ansible.runner import PlaybookResult
from cluster_cli.cli import main
from cluster_cli.errors import MAX_PROBLEMS_SHOWN, ClusterCliError, ExitCode, InventoryError
from cluster_cli.model import Inventory
from cluster_cli.progress import summary_line
from devtools.deploy_summary import parse_summary_line
from cluster_cli.status import ClusterStatus, NodeStatus
from cluster_cli.smoke import CHECKS, SmokeSetupError, UnknownCheckError


@pytest.fixture
def runner(tmp_path, monkeypatch) -> CliRunner:
    # secrets and default build directories go to a private state home
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return CliRunner()


def write(tmp_path: Path, text: str, name: str = "inventory.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def refused(runner: CliRunner, path: Path) -> list[str]:
    """The lines `validate` prints for an inventory it refuses (exit 2, nothing on stdout)."""
    result = runner.invoke(main, ["validate", str(path)])
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    return result.stderr.splitlines()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# -- validate --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "summary"),
    [
        ("local", "cluster 'local' is valid: 3 nodes in 1 group, 3 GPUs, 1 partition, 1 managed host."),
        ("minimal", "cluster 'minimal' is valid: 4 nodes in 1 group, 16 GPUs, 1 partition, 5 managed hosts."),
        (
            "gpu-cluster",
            "cluster 'atlas' is valid: 56 nodes in 3 groups, 384 GPUs, 3 partitions, 60 managed hosts.",
        ),
    ],
)
def test_validate_shipped_inventories(runner, name, summary):
    path = SHIPPED_INVENTORIES[name]
    result = runner.invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{path}: {summary}\n"
    assert result.stderr == ""


def test_validate_quiet(runner):
    result = runner.invoke(main, ["validate", "-q", str(SHIPPED_INVENTORIES["local"])])
    assert (result.exit_code, result.output) == (0, "")


def test_validate_invalid_inventory_lists_every_problem_and_exits_2(runner, tmp_path):
    text = edit(BASE, "login: [head]", "logn: [head]")
    text = edit(text, "count: 2", "count: 0")
    path = write(tmp_path, text)
    result = runner.invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{path}:{line_of(text, 'logn')}: logn: unknown field (did you mean 'login'?); known fields: "
        + ", ".join(sorted(Inventory.model_fields)),
        f"{path}:{line_of(text, 'count: 0')}: node_groups[0].gpus.count: Input should be greater than or equal to 1",
        f"{path}: 2 problems; nothing was changed.",
    ]


def test_validate_prints_the_first_problems_and_counts_the_rest(runner, tmp_path):
    text = BASE + "".join(f"extra{number:02}: 1\n" for number in range(MAX_PROBLEMS_SHOWN + 7))
    path = write(tmp_path, text)
    lines = refused(runner, path)
    assert len(lines) == MAX_PROBLEMS_SHOWN + 2
    assert lines[0].startswith(f"{path}:{line_of(text, 'extra00:')}: extra00: unknown field")
    assert lines[-2:] == ["... and 7 more problems", f"{path}: {MAX_PROBLEMS_SHOWN + 7} problems; nothing was changed."]


def test_validate_refuses_a_merge_key_bomb_with_one_line(runner, tmp_path):
    text = BASE + "x0: &x0 {a: 1, b: 2, c: 3, d: 4}\n" + "".join(
        f"x{level}: &x{level} {{<<: [" + ", ".join([f"*x{level - 1}"] * 9) + "]}\n" for level in range(1, 7)
    )
    path = write(tmp_path, text)
    assert refused(runner, path) == [
        f"{path}:{line_of(text, 'x5: &x5')}: (yaml): aliases (*name) or merge keys (<<) repeat more than 100,000 values",
        f"{path}: 1 problem; nothing was changed.",
    ]


def test_validate_one_problem_is_singular(runner, tmp_path):
    text = edit(BASE, "nodes: [gpu, dev]", "nodes: [gpu]")
    path = write(tmp_path, text)
    assert refused(runner, path) == [
        f"{path}:{line_of(text, 'partitions:')}: partitions: nodes in no partition: dev[1-2]",
        f"{path}: 1 problem; nothing was changed.",
    ]


def test_validate_missing_file_exits_2(runner, tmp_path):
    path = tmp_path / "nope.yaml"
    result = runner.invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == f"{path}:1: (file): cannot read: No such file or directory"


def test_validate_invalid_yaml_exits_2_without_traceback(runner, tmp_path):
    path = write(tmp_path, "cluster_name: [\n")
    result = runner.invoke(main, ["validate", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    # the file has one line: the error at its end is on that line, not on a line 2 it lacks
    assert result.stderr.splitlines()[0].startswith(f"{path}:1: (yaml): invalid YAML: ")


def test_usage_errors_exit_2(runner):
    assert runner.invoke(main, ["validate"]).exit_code == 2
    assert runner.invoke(main, ["no-such-command"]).exit_code == 2


def test_version(runner):
    result = runner.invoke(main, ["--version"])
    assert (result.exit_code, result.stdout) == (0, f"cluster-cli, version {__version__}\n")


# -- render ----------------------------------------------------------------------------------------


def test_render_writes_the_build_directory(runner, tmp_path):
    out = tmp_path / "build"
    result = runner.invoke(main, ["render", str(SHIPPED_INVENTORIES["gpu-cluster"]), "-o", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for relative in (
        "slurm/slurm.conf",
        "slurm/gres.conf",
        "slurm/cgroup.conf",
        "slurm/topology.conf",
        "nccl/nccl.conf",
        "ansible/inventory.yml",
    ):
        assert f"wrote {out / relative}" in lines
        assert mode(out / relative) == 0o644
    assert f"wrote {out / 'slurm/slurmdbd.conf'} (0600, holds a secret)" in lines
    assert mode(out / "slurm" / "slurmdbd.conf") == 0o600
    assert mode(out) == 0o700
    secrets_dir = tmp_path / "state" / "cluster-cli" / "atlas" / "secrets"
    password = (secrets_dir / "slurmdbd_password").read_text().strip()
    assert f"StoragePass={password}\n" in (out / "slurm" / "slurmdbd.conf").read_text()
    for path in out.rglob("*"):
        if path.is_file() and path.name != "slurmdbd.conf" and mode(path) != 0o600:
            assert password not in path.read_text(), f"{path} is readable by others and holds the password"
    assert password not in result.output


def test_render_twice_reuses_the_secrets_and_gives_the_same_files(runner, tmp_path):
    inventory = str(SHIPPED_INVENTORIES["local"])
    out = tmp_path / "build"
    assert runner.invoke(main, ["render", inventory, "-o", str(out)]).exit_code == 0
    first = {str(path.relative_to(out)): path.read_bytes() for path in out.rglob("*") if path.is_file()}
    assert runner.invoke(main, ["render", inventory, "-o", str(out)]).exit_code == 0
    second = {str(path.relative_to(out)): path.read_bytes() for path in out.rglob("*") if path.is_file()}
    assert first == second


def test_render_default_build_directory(runner, tmp_path):
    result = runner.invoke(main, ["render", str(SHIPPED_INVENTORIES["minimal"])])
    assert result.exit_code == 0, result.output
    build = tmp_path / "state" / "cluster-cli" / "minimal" / "build"
    assert (build / "slurm" / "slurm.conf").is_file()
    assert mode(tmp_path / "state" / "cluster-cli" / "minimal" / "secrets") == 0o700


def test_render_invalid_inventory_changes_nothing(runner, tmp_path):
    path = write(tmp_path, edit(BASE, "count: 2", "count: -1"))
    out = tmp_path / "build"
    result = runner.invoke(main, ["render", str(path), "-o", str(out)])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"{path}: 1 problem; nothing was changed."
    assert not out.exists()
    assert not (tmp_path / "state").exists(), "no secrets are generated for an invalid inventory"


def _foreign_directory(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "notes.txt").write_text("keep me\n")
    return path


def test_render_refuses_a_directory_it_did_not_make(runner, tmp_path):
    out = _foreign_directory(tmp_path / "project")
    result = runner.invoke(main, ["render", str(SHIPPED_INVENTORIES["local"]), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {out} is not empty and cluster-cli did not make it (no .cluster-cli-build in it); "
        "its contents would be deleted: choose a new or empty directory\n"
    )
    assert sorted(path.name for path in out.iterdir()) == ["notes.txt"]
    assert not (tmp_path / "state").exists(), "refused before any secret is generated"


def test_render_refuses_the_home_directory_and_the_current_one(runner, tmp_path, monkeypatch):
    home = _foreign_directory(tmp_path / "home")
    monkeypatch.chdir(home)
    for output in (str(home), "."):  # what `-o ~` and `-o .` reach cluster-cli as
        result = runner.invoke(main, ["render", str(SHIPPED_INVENTORIES["local"]), "-o", output])
        assert result.exit_code == 2, result.output
        assert (home / "notes.txt").read_text() == "keep me\n"


def _no_host_reached(*args, **kwargs):
    raise AssertionError("a host was probed or a playbook started: the refusal came too late")


@pytest.mark.parametrize("verb", ["plan", "deploy", "upgrade"])
def test_build_dir_of_other_verbs_refuses_a_directory_it_did_not_make(runner, tmp_path, verb, monkeypatch):
    # without the refusal these verbs would go on to the hosts: the shipped inventory is this machine
    monkeypatch.setattr("cluster_cli.probe.probe_host", _no_host_reached)
    monkeypatch.setattr("cluster_cli.ansible.runner.subprocess.Popen", _no_host_reached)
    out = _foreign_directory(tmp_path / "project")
    extra = ["--to", "26.05.5-1"] if verb == "upgrade" else []
    result = runner.invoke(main, [verb, str(SHIPPED_INVENTORIES["local"]), "--build-dir", str(out), *extra])
    assert result.exit_code == 2, result.output
    assert "cluster-cli did not make it" in result.stderr
    assert sorted(path.name for path in out.iterdir()) == ["notes.txt"]


def test_render_replaces_a_directory_an_earlier_render_made(runner, tmp_path):
    out = tmp_path / "build"
    inventory = str(SHIPPED_INVENTORIES["local"])
    assert runner.invoke(main, ["render", inventory, "-o", str(out)]).exit_code == 0
    (out / "slurm" / "stale.conf").write_text("from an older render\n")
    assert runner.invoke(main, ["render", inventory, "-o", str(out)]).exit_code == 0
    assert not (out / "slurm" / "stale.conf").exists()
    assert (out / ".cluster-cli-build").is_file()


def test_render_refuses_a_munge_key_that_is_a_symbolic_link(runner, tmp_path):
    secrets = tmp_path / "state" / "cluster-cli" / "local" / "secrets"
    secrets.mkdir(parents=True, mode=0o700)
    (tmp_path / "planted").write_bytes(b"k" * 1024)
    (secrets / "munge.key").symlink_to(tmp_path / "planted")
    out = tmp_path / "build"
    result = runner.invoke(main, ["render", str(SHIPPED_INVENTORIES["local"]), "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: {secrets / 'munge.key'}: not a regular file (a symbolic link or something else); not using it\n"
    )
    assert not out.exists()


def test_render_unwritable_output_exits_1(runner, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = runner.invoke(main, ["render", str(SHIPPED_INVENTORIES["local"]), "-o", str(blocker / "build")])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot write ")
    assert "Traceback" not in result.output


def test_render_with_a_password_slurmdbd_conf_cannot_hold_exits_1(runner, tmp_path):
    secrets_dir = tmp_path / "state" / "cluster-cli" / "local" / "secrets"
    secrets_dir.mkdir(parents=True, mode=0o700)
    (secrets_dir / "slurmdbd_password").write_text("bad#password\n")
    out = tmp_path / "build"
    result = runner.invoke(main, ["render", str(SHIPPED_INVENTORIES["local"]), "-o", str(out)])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {secrets_dir / 'slurmdbd_password'}: the database password is empty or contains '#', "
        "quotes or white space\n"
    )
    assert "bad#password" not in result.output
    assert not out.exists()


def test_render_keeps_the_previous_build_when_it_fails(runner, tmp_path):
    inventory = str(SHIPPED_INVENTORIES["local"])
    out = tmp_path / "build"
    assert runner.invoke(main, ["render", inventory, "-o", str(out)]).exit_code == 0
    before = (out / "slurm" / "slurm.conf").read_text()
    (tmp_path / "state" / "cluster-cli" / "local" / "secrets" / "slurmdbd_password").write_text(
        "bad password\n"
    )
    assert runner.invoke(main, ["render", inventory, "-o", str(out)]).exit_code == 1
    assert (out / "slurm" / "slurm.conf").read_text() == before


# -- schema ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema() -> dict:
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_schema_is_a_valid_json_schema(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "cluster-cli inventory"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", sorted(SHIPPED_INVENTORIES))
def test_shipped_inventories_validate_against_the_schema(schema, name):
    document = yaml.safe_load(SHIPPED_INVENTORIES[name].read_text())
    jsonschema.Draft202012Validator(schema).validate(document)


def test_the_base_test_inventory_validates_against_the_schema(schema):
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(BASE))


def test_the_schema_accepts_unquoted_off_and_no_like_validate(schema):
    text = edit(BASE, "      type: a100\n", "      type: a100\n      autodetect: off\n")
    text = edit(text, "    default: true\n", "    default: true\n    oversubscribe: no\n")
    jsonschema.Draft202012Validator(schema).validate(yaml.safe_load(text))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("login: [head]", "logn: [head]"),
        ("count: 2", "count: 0"),
        ("cluster_name: test", "cluster_name: Test"),
        ("      type: a100\n", "      type: a100\n      autodetect: maybe\n"),
        ("    cores_per_socket: 8\n", ""),
    ],
)
def test_the_schema_rejects_what_validate_rejects(schema, old, new):
    document = yaml.safe_load(edit(BASE, old, new))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(document)


def test_schema_output_is_stable(runner):
    assert runner.invoke(main, ["schema"]).stdout == runner.invoke(main, ["schema"]).stdout


def test_smoke_list_needs_no_inventory(runner):
    result = runner.invoke(main, ["smoke", "--list"])
    assert result.exit_code == 0, result.output
    listed = [line.split()[0] for line in result.output.splitlines() if line.strip()]
    assert listed == [check.name for check in CHECKS]


def test_smoke_without_an_inventory_is_a_usage_error(runner):
    result = runner.invoke(main, ["smoke"])
    assert result.exit_code == 2
    assert "Missing argument 'INVENTORY'" in result.output


def test_an_unknown_check_name_is_a_usage_error_before_anything_runs(runner, monkeypatch):
    monkeypatch.setattr("cluster_cli.smoke_control.inventory_targets.smoke_plan", lambda *args: pytest.fail("smoke went on"))
    result = runner.invoke(main, ["smoke", str(SHIPPED_INVENTORIES["local"]), "--only", "srun,nope"])
    assert result.exit_code == ExitCode.INVALID
    assert result.stderr.startswith("error: unknown check(s) nope; known: srun, gpu-binding")


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (ClusterCliError("build directory not writable"), ExitCode.FAILURE, "error: build directory"),
        (SmokeSetupError("no Slurm client commands on PATH"), ExitCode.FAILURE, "error: no Slurm client"),
        (UnknownCheckError("unknown check(s) x"), ExitCode.INVALID, "error: unknown check(s) x"),
    ],
)
def test_errors_map_to_a_message_and_an_exit_code_in_one_place(runner, monkeypatch, error, code, message):
    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr("cluster_cli.status.collect_status", broken)
    result = runner.invoke(main, ["status", str(SHIPPED_INVENTORIES["local"])])
    assert result.exit_code == code
    assert result.stderr.startswith(message) and "Traceback" not in result.output


def test_an_inventory_error_is_a_cluster_cli_error_with_exit_2():
    assert issubclass(InventoryError, ClusterCliError) and InventoryError.exit_code == ExitCode.INVALID == 2


def test_the_run_summary_line_reads_back(tmp_path):
    result = PlaybookResult(0, 46.21, tmp_path / "log", recap={"c1": {"changed": 2}, "c2": {"changed": 1}})
    line = summary_line("Deploy", result)
    assert line == "Deploy: 46.2 s, 3 changed"
    assert parse_summary_line(f"PLAY ...\n{line}   \n┏━━┓") == (46.2, 3)
    assert parse_summary_line("no summary here") is None


@pytest.mark.parametrize(
    ("state", "healthy"),
    [("idle", True), ("mixed", True), ("allocated", True), ("idle*", False), ("down*", False), ("drained", False)],
)
def test_status_counts_a_not_responding_node_as_unhealthy(state, healthy):
    status = ClusterStatus("c", "ctl", True, "UP", nodes=[NodeStatus("node1", state, "none", "gpu:1")])
    assert status.healthy is healthy


@pytest.mark.skipif(__import__("shutil").which("ssh") is None, reason="needs the ssh client")
def test_plan_names_each_host_it_cannot_probe_and_exits_1(runner: CliRunner, tmp_path: Path) -> None:
    # real SSH to a port nothing listens on: every host answers "connection refused", nothing is guessed
    text = SHIPPED_INVENTORIES["minimal"].read_text()
    text = text.replace("ssh:\n  user: root\n", "ssh:\n  user: root\n  port: 1\n")
    text = text.replace("address: 10.0.0.10", "address: 127.0.0.1").replace("10.0.0.[21-24]", "127.0.0.[21-24]")
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(text)
    result = runner.invoke(main, ["plan", str(inventory), "--json"])
    assert result.exit_code == ExitCode.FAILURE, result.output
    unreachable = json.loads(result.stdout)["unreachable"]
    assert set(unreachable) == {"head", "gpu01", "gpu02", "gpu03", "gpu04"}
    assert all("refused" in reason.lower() or "port 1" in reason for reason in unreachable.values()), unreachable


def _record_playbooks(monkeypatch) -> list[dict]:
    runs: list[dict] = []

    def run_playbook(inventory, playbook, title, build_dir, options, verbose, extra_vars=None):
        runs.append({"playbook": playbook, **(extra_vars or {})})

    monkeypatch.setattr("cluster_cli.commands.playbook_output.run_playbook", run_playbook)
    return runs


@pytest.mark.parametrize("answer", [[], ["--yes", "other"], ["--yes", ""]])
def test_teardown_purge_without_the_cluster_name_is_refused_before_any_host(runner, monkeypatch, answer):
    runs = _record_playbooks(monkeypatch)
    result = runner.invoke(main, ["teardown", str(SHIPPED_INVENTORIES["local"]), "--purge", *answer])
    assert result.exit_code == 2, result.output
    assert "nothing was touched" in result.stderr and runs == []
    if not answer:  # no terminal in the test: it says how a script confirms
        assert "--yes local" in result.stderr


def test_teardown_purge_with_the_cluster_name_dumps_the_database_first(runner, monkeypatch):
    runs = _record_playbooks(monkeypatch)
    result = runner.invoke(main, ["teardown", str(SHIPPED_INVENTORIES["local"]), "--purge", "--yes", "local",
                                  "--backup-dir", "/srv/backups"])
    assert result.exit_code == 0, result.output
    [run] = runs
    assert run["teardown_purge"] is True
    assert run["slurmdbd_teardown_dump_file"].startswith("/srv/backups/slurm_acct_db-local-")
    assert run["slurmdbd_teardown_dump_file"] in result.output


def test_teardown_without_purge_asks_nothing(runner, monkeypatch):
    runs = _record_playbooks(monkeypatch)
    result = runner.invoke(main, ["teardown", str(SHIPPED_INVENTORIES["local"])])
    assert result.exit_code == 0, result.output
    assert runs == [{"playbook": "teardown.yml", "teardown_purge": False}]
