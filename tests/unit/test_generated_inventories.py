"""Bad input, a thousand ways: generated inventories are each accepted or rejected with
``file:line: field: message`` problems, never with a traceback, and an invalid one touches nothing.

The corpus (tests/unit/inventory_mutants.py) mutates the shipped inventories with a fixed seed:
every mutant is written to a file and loaded through ``load_cluster``, the library path of
``cluster-cli validate``. A subset also goes through the real CLI, ``validate`` and ``deploy``,
with the Ansible launcher replaced by a recorder: an invalid inventory must never reach it, nor
leave a build directory, a secret or a log behind.
"""

from __future__ import annotations

import ast
import random
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from inventory_mutants import ALWAYS_VALID, KINDS, SEED, Mutant, generate

from cluster_cli import deploy as deploy_module
from cluster_cli import plan as plan_module
from cluster_cli.ansible import runner as runner_module
from cluster_cli.ansible.runner import PlaybookResult
from cluster_cli.cli import main
from cluster_cli.cluster import Cluster
from cluster_cli.errors import MAX_PROBLEMS_SHOWN, ExitCode, InventoryError
from cluster_cli.loader import load_cluster, load_cluster_text
from cluster_cli.probe import HostProbe
from cluster_cli.render import render_configs

CORPUS = generate()
CLI_SUBSET_SIZE = 200

# The field of a problem: a pseudo-field for what is not a field, or a path of keys and indexes
# as errors.format_location writes it (a key that is not plain text is written as ['repr']).
_KEY = r"[^\s.\[\]:'\"]+"
_QUOTED = r"\[(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")\]"
_FIELD = rf"\((?:yaml|top level|file)\)|(?:{_KEY}|{_QUOTED}|\[\d+\])(?:\.{_KEY}|{_QUOTED}|\[\d+\])*"
_PART = re.compile(rf"\.?({_KEY})|\[(\d+)\]|({_QUOTED})")


def problem_pattern(file: str) -> re.Pattern[str]:
    """``FILE:LINE: FIELD: MESSAGE``, as docs/inventory.md and the README document it."""
    return re.compile(rf"^{re.escape(file)}:(?P<line>[1-9][0-9]*): (?P<field>{_FIELD}): (?P<message>\S.*)$")


def field_parts(field: str) -> list[str | int]:
    parts: list[str | int] = []
    for match in _PART.finditer(field):
        key, index, quoted = match.groups()
        if key is not None:
            parts.append(key)
        elif index is not None:
            parts.append(int(index))
        else:
            parts.append(ast.literal_eval(quoted[1:-1]))
    return parts


def line_count(data: bytes) -> int:
    return max(1, len(data.decode("utf-8", errors="replace").splitlines()))


def deepest_present(document: Any, parts: list[str | int]) -> tuple[list[str | int], Any]:
    """The longest prefix of ``parts`` that exists in the parsed document, and its value."""
    node, found = document, []
    for part in parts:
        if isinstance(node, dict):
            matches = [key for key in node if str(key) == str(part)]
            if not matches:
                break
            node = node[matches[0]]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            break
        found.append(part)
    return found, node


def _parsed(mutant: Mutant) -> Any:
    try:
        return yaml.safe_load(mutant.data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        return None


@dataclass
class Outcome:
    mutant: Mutant
    path: Path
    cluster: Cluster | None = None
    problems: list[str] | None = None
    error: BaseException | None = None

    @property
    def accepted(self) -> bool:
        return self.cluster is not None


def load(mutant: Mutant, path: Path) -> Outcome:
    path.write_bytes(mutant.data)
    outcome = Outcome(mutant, path)
    try:
        outcome.cluster = load_cluster(path)
    except InventoryError as error:
        outcome.problems = [str(problem) for problem in error.problems]
        outcome.error = error
    except Exception as error:  # noqa: BLE001 - the oracle: anything else is a traceback
        outcome.error = error
    return outcome


def check(outcome: Outcome, stats: Counter[str] | None = None) -> list[str]:
    """Everything wrong with one outcome; [] when it is a clean acceptance or rejection.

    ``stats`` counts how often each check had something to check, so a test can show that the
    oracle was not vacuous."""
    stats = Counter() if stats is None else stats
    mutant, path = outcome.mutant, outcome.path
    if outcome.cluster is not None:
        if mutant.must_fail:
            return ["accepted, but the mutation makes it invalid"]
        try:
            render_configs(outcome.cluster, "generatedPassword123")  # accepted means usable
        except Exception as error:  # noqa: BLE001
            return [f"accepted, but it does not render: {error!r}"]
        return []
    if outcome.problems is None:
        return [f"traceback: {outcome.error!r}"]
    if mutant.kind in ALWAYS_VALID:
        return [f"rejected a valid spelling: {outcome.problems[:3]}"]
    assert isinstance(outcome.error, InventoryError)
    shown = outcome.problems[:MAX_PROBLEMS_SHOWN]
    hidden = len(outcome.problems) - len(shown)
    if hidden:
        shown.append(f"... and {hidden} more problem{'s' if hidden != 1 else ''}")
    if str(outcome.error).splitlines() != shown:
        return ["the error text is not its first problems, one a line"]
    wrong: list[str] = []
    pattern = problem_pattern(str(path))
    last_line = line_count(mutant.data)
    # parsed only where a problem names a field: the oracle must not expand a merge-key bomb itself
    document = _parsed(mutant) if any(not line.split(": ", 2)[1].startswith("(") for line in outcome.problems) else None
    text_lines = mutant.data.decode("utf-8", errors="replace").splitlines()
    parsed = []
    for problem in outcome.problems:
        match = pattern.match(problem)
        if match is None:
            wrong.append(f"not 'file:line: field: message': {problem[:300]!r}")
            continue
        line, field = int(match["line"]), match["field"]
        parsed.append((line, field, match["message"]))
        if line > last_line:
            wrong.append(f"line {line} past the end ({last_line} lines): {problem[:300]}")
            continue
        if field.startswith("(") or not isinstance(document, dict):
            continue
        # the line oracle, independent of the loader's source map: the problem's line holds the
        # deepest key of its field that the file has (a missing field points at its parent)
        present, value = deepest_present(document, field_parts(field))
        if not present:
            continue
        last = present[-1]
        if isinstance(last, str):
            stats["line holds the key"] += 1
            # a key with a line break is written with an escape ("KillWait\n"): its printable part
            if "".join(char for char in last if char.isprintable()) not in text_lines[line - 1]:
                wrong.append(f"line {line} does not hold key {last!r}: {problem[:300]}")
        elif isinstance(value, str) and value and "\n" not in value:
            stats["line holds the item"] += 1
            if value not in text_lines[line - 1]:
                wrong.append(f"line {line} does not hold item {value!r}: {problem[:300]}")
    stats["problems"] += len(parsed)
    if parsed and mutant.expect_field is not None:
        stats["expected field"] += 1
        expected = mutant.expect_field
        if not any(field == expected or field.startswith((expected + ".", expected + "[")) for _, field, _ in parsed):
            wrong.append(f"no problem at {expected}: {outcome.problems[:5]}")
    if parsed and mutant.expect_lines is not None:
        stats["expected line"] += 1
        first, last = mutant.expect_lines
        if not any(first <= line <= last for line, _, _ in parsed):
            wrong.append(f"no problem on lines {first}-{last}: {outcome.problems[:5]}")
    if mutant.kind == "duplicate_keys" and not any(m.startswith("duplicate key ") for _, _, m in parsed):
        wrong.append(f"no duplicate key reported: {outcome.problems[:5]}")
    return wrong


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> list[Outcome]:
    directory = tmp_path_factory.mktemp("generated")
    return [load(mutant, directory / f"{number:04d}-{mutant.kind}.yaml") for number, mutant in enumerate(CORPUS)]


# -- the corpus -------------------------------------------------------------------------------------


def test_the_corpus_has_a_thousand_distinct_inventories_and_is_reproducible():
    assert len(CORPUS) >= 1000
    assert len({mutant.data for mutant in CORPUS}) == len(CORPUS)
    assert {mutant.kind for mutant in CORPUS} == set(KINDS)
    assert {(mutant.kind, mutant.base) for mutant in CORPUS} >= {
        (kind, base) for kind in KINDS for base in ("local", "minimal", "gpu-cluster")
    }
    again = generate(SEED)
    assert [(m.kind, m.base, m.label, m.data) for m in again] == [(m.kind, m.base, m.label, m.data) for m in CORPUS]


# -- every inventory through the library ------------------------------------------------------------------


def test_every_generated_inventory_is_accepted_or_rejected_cleanly(outcomes):
    stats: Counter[str] = Counter()
    failures = [(outcome, wrong) for outcome in outcomes for wrong in [check(outcome, stats)] if wrong]
    report = "\n".join(f"{o.mutant.ident} ({o.path.name}): {'; '.join(w)}" for o, w in failures[:25])
    assert not failures, f"{len(failures)} of {len(outcomes)} generated inventories went wrong:\n{report}"
    # the oracle had something to check: most rejections name a field of the file, on its line
    print(f"\nchecks made: {dict(sorted(stats.items()))}")
    assert stats["problems"] >= 1000
    assert stats["line holds the key"] >= 500
    assert stats["expected field"] >= 800 and stats["expected line"] >= 150


def test_every_kind_of_mistake_is_caught(outcomes):
    """Accepted/rejected per kind; a kind meant to be invalid that is ever accepted, or never
    rejected, means a validation gap or a broken generator."""
    counts: Counter[tuple[str, str]] = Counter()
    for outcome in outcomes:
        counts[(outcome.mutant.kind, "accepted" if outcome.accepted else "rejected")] += 1
    rows = [f"{'kind':26} {'accepted':>8} {'rejected':>8}"]
    rows += [f"{kind:26} {counts[(kind, 'accepted')]:8} {counts[(kind, 'rejected')]:8}" for kind in KINDS]
    rows.append(
        f"{'total':26} {sum(v for (_, a), v in counts.items() if a == 'accepted'):8} "
        f"{sum(v for (_, a), v in counts.items() if a == 'rejected'):8}"
    )
    table = "\n".join(rows)
    print(f"\n{len(outcomes)} generated inventories:\n{table}")
    for kind, must_fail in KINDS.items():
        if kind in ALWAYS_VALID:
            assert counts[(kind, "rejected")] == 0 and counts[(kind, "accepted")] > 0, table
        elif must_fail:
            assert counts[(kind, "accepted")] == 0 and counts[(kind, "rejected")] > 0, table
        else:
            assert counts[(kind, "rejected")] > 0, table


# -- a subset through the CLI: validate and deploy --------------------------------------------------------


def cli_subset() -> list[Mutant]:
    """Every kind from every base at least once, then a seeded sample, CLI_SUBSET_SIZE in all."""
    chosen: dict[int, Mutant] = {}
    for number, mutant in enumerate(CORPUS):
        if not any((m.kind, m.base) == (mutant.kind, mutant.base) for m in chosen.values()):
            chosen[number] = mutant
    rest = [number for number in range(len(CORPUS)) if number not in chosen]
    for number in random.Random(SEED).sample(rest, CLI_SUBSET_SIZE - len(chosen)):
        chosen[number] = CORPUS[number]
    return [chosen[number] for number in sorted(chosen)]


class LauncherCalls:
    """Stands in for everything in cluster_cli that starts Ansible; records what would have run."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def playbook(self, playbook: Path, inventory: Path, var_files, log_path: Path, *args: Any, **kwargs: Any):
        self.calls.append(("ansible-playbook", (playbook, inventory, tuple(var_files))))
        return PlaybookResult(returncode=0, duration_s=0.0, log_path=log_path)

    def ad_hoc(self, *args: Any, **kwargs: Any) -> tuple[int, str]:
        self.calls.append(("ansible", args))
        return 0, ""

    def popen(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append(("Popen", args))
        raise AssertionError("a process was started")

    def probe(self, cluster: Any, files: Any, owners: Any = None) -> dict[str, HostProbe]:
        """Every host answers as a fresh machine would: nothing installed, so the plan has work."""
        self.calls.append(("probe", tuple(cluster.hosts)))
        return {name: HostProbe(name) for name in cluster.hosts}


def files_under(directory: Path) -> list[str]:
    return sorted(str(path.relative_to(directory)) for path in directory.rglob("*"))


def test_cli_validate_and_deploy_on_a_subset(tmp_path, monkeypatch):
    subset = cli_subset()
    assert len(subset) == CLI_SUBSET_SIZE
    assert {m.kind for m in subset} == set(KINDS)
    launcher = LauncherCalls()
    monkeypatch.setattr(deploy_module, "run_playbook", launcher.playbook)
    monkeypatch.setattr(runner_module, "run_playbook", launcher.playbook)
    monkeypatch.setattr(deploy_module, "run_ad_hoc", launcher.ad_hoc)
    monkeypatch.setattr(runner_module, "run_ad_hoc", launcher.ad_hoc)
    monkeypatch.setattr(runner_module.subprocess, "Popen", launcher.popen)
    monkeypatch.setattr(plan_module, "probe_cluster", launcher.probe)
    runner = CliRunner()
    wrong: list[str] = []
    seen = Counter()
    for number, mutant in enumerate(subset):
        work = tmp_path / f"{number:03d}"
        work.mkdir()
        inventory = work / "inventory.yaml"
        inventory.write_bytes(mutant.data)
        env = {"XDG_STATE_HOME": str(work / "state"), "HOME": str(work / "home")}
        pattern = problem_pattern(str(inventory))
        valid = load(mutant, work / "library-copy.yaml").accepted
        (work / "library-copy.yaml").unlink()
        seen["valid" if valid else "invalid"] += 1

        for args in (["validate", str(inventory)], ["deploy", str(inventory), "--build-dir", str(work / "build")]):
            before = len(launcher.calls)
            result = runner.invoke(main, args, env=env)
            verb = f"{mutant.ident}: {args[0]}"
            if result.exception is not None and not isinstance(result.exception, SystemExit):
                wrong.append(f"{verb}: {result.exception!r}")
                continue
            if "Traceback" in result.output:
                wrong.append(f"{verb}: a traceback in the output")
            if valid:
                if result.exit_code != 0:
                    wrong.append(f"{verb}: exit {result.exit_code} for a valid inventory: {result.output[-500:]}")
                if args[0] == "deploy" and [call[0] for call in launcher.calls[before:]] != ["probe", "ansible-playbook"]:
                    wrong.append(f"{verb}: a valid inventory did not reach the (fake) launcher")
                continue
            if result.exit_code != ExitCode.INVALID:
                wrong.append(f"{verb}: exit {result.exit_code}, not 2: {result.output[-500:]}")
            if result.stdout:
                wrong.append(f"{verb}: wrote to stdout: {result.stdout[:200]!r}")
            lines = result.stderr.splitlines()
            count = len(lines) - 1
            closing = f"{inventory}: {count} problem{'s' if count != 1 else ''}; nothing was changed."
            if not lines or lines[-1] != closing:
                wrong.append(f"{verb}: no closing 'nothing was changed' line: {lines[-1:]}")
            bad = [line for line in lines[:-1] if not pattern.match(line)]
            if bad or count < 1:
                wrong.append(f"{verb}: lines that are not file:line: field: message: {bad[:3]}")
            if len(launcher.calls) != before:
                wrong.append(f"{verb}: Ansible was started for an invalid inventory: {launcher.calls[before:]}")
            if files_under(work) != ["inventory.yaml"]:
                wrong.append(f"{verb}: files written for an invalid inventory: {files_under(work)[:10]}")
    assert not wrong, f"{len(wrong)} problems:\n" + "\n".join(wrong[:25])
    # the subset exercises both paths, and the fake launcher really stands where deploy calls it
    assert seen["valid"] > 0 and seen["invalid"] > 100, seen
    # each valid inventory was probed once (the plan) and then deployed once
    assert [name for name, _ in launcher.calls] == ["probe", "ansible-playbook"] * seen["valid"]


# -- regressions: bugs the corpus found --------------------------------------------------------------------

INVENTORIES = Path(__file__).resolve().parents[2] / "inventories"
MINIMAL = (INVENTORIES / "examples" / "minimal.yaml").read_text()
LOCAL = (INVENTORIES / "local" / "inventory.yaml").read_text()


def problems_of(text: str) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        load_cluster_text(text, "inv.yaml")
    return [str(problem) for problem in caught.value.problems]


FLOW_SEQUENCE = "while parsing a flow sequence: expected ',' or ']', but got '<stream end>'"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        # an unclosed bracket or quote at the end: the line it was opened on, not a line past the end
        ("a: [b, c\n", 1, FLOW_SEQUENCE),
        ("a: [b, c", 1, FLOW_SEQUENCE),
        ("a: b\nc: 'x\n\n# the end\n", 2, "while scanning a quoted scalar: found unexpected end of stream"),
        ("a: b\nc: {d: 1\n", 2, "while parsing a flow mapping: expected ',' or '}', but got '<stream end>'"),
        ("a: b\nc:d\n", 2, "while scanning a simple key: could not find expected ':'"),
        # nothing left open: the last line
        ("a: b\n%YAML 1.1\n", 2, "expected '<document start>', but found '<stream end>'"),
    ],
)
def test_a_syntax_error_at_the_end_of_the_file_is_on_a_line_the_file_has(text, line, reason):
    assert problems_of(text) == [f"inv.yaml:{line}: (yaml): invalid YAML: {reason}"]


def test_a_stray_bracket_is_reported_on_its_line_not_where_the_nesting_scan_gave_up():
    # the nesting pre-scan used to fail first, five lines later ("mapping values are not allowed")
    text = LOCAL.replace("    real_memory_mb: 3072\n", "    real_memory_mb: ]3072\n")
    line = text.splitlines().index("    real_memory_mb: ]3072") + 1
    assert problems_of(text) == [f"inv.yaml:{line}: (yaml): invalid YAML: expected the node content, but found ']'"]


def test_text_that_is_not_utf8_is_reported_at_the_line_of_the_first_bad_byte(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(MINIMAL.replace("user: root", "user: r\xe9ot").encode("latin-1"))
    line = MINIMAL.splitlines().index("  user: root") + 1
    with pytest.raises(InventoryError) as caught:
        load_cluster(path)
    assert [str(problem) for problem in caught.value.problems] == [f"{path}:{line}: (file): not UTF-8 text"]


def test_crlf_and_cr_line_ends_still_read_as_before(tmp_path):
    for ending in ("\r\n", "\r"):
        path = tmp_path / "inventory.yaml"
        path.write_bytes(MINIMAL.replace("\n", ending).encode())
        assert load_cluster(path).name == "minimal"


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("cgroup ", "['cgroup ']"),  # a trailing space, invisible in "cgroup : unknown field"
        ("my key", "['my key']"),
        ("a.b", "['a.b']"),
        ("ports:", "['ports:']"),
    ],
)
def test_keys_that_would_make_the_field_ambiguous_are_quoted(key, field):
    text = MINIMAL + f"{key!r}: 1\n"
    (found,) = problems_of(text)
    assert found.startswith(f"inv.yaml:{len(text.splitlines())}: {field}: unknown field")
    assert problem_pattern("inv.yaml").match(found)


def test_slurm_conf_keys_with_spaces_are_quoted_in_the_field():
    text = MINIMAL + "slurm:\n  conf:\n    Kill Wait: 30\n"
    assert problems_of(text) == [
        f"inv.yaml:{len(text.splitlines())}: slurm.conf['Kill Wait']: 'Kill Wait' is not a configuration key "
        "(letters and digits, e.g. KillWait)"
    ]


def test_node_names_longer_than_a_host_name_are_refused():
    text = MINIMAL.replace("nodes: gpu[01-04]", "nodes: " + "n" * 64 + "[1-4]")
    line = text.splitlines().index("    nodes: " + "n" * 64 + "[1-4]") + 1
    assert problems_of(text) == [
        f"inv.yaml:{line}: node_groups[0].nodes: node name '{'n' * 20}...{'n' * 7}{i}' is longer than 63 characters"
        for i in range(1, 5)
    ]
    text = MINIMAL.replace("nodes: gpu[01-04]", "nodes: " + "n" * 63).replace("    addresses: 10.0.0.[21-24]\n", "")
    assert load_cluster_text(text, "inv.yaml").nodes[0].name == "n" * 63


def test_many_bad_names_in_one_hostlist_are_a_few_problems_not_one_per_name():
    text = MINIMAL.replace("gpu[01-04]", "gpu[1-100000]-").replace("    addresses: 10.0.0.[21-24]\n", "")
    line = text.splitlines().index("    nodes: gpu[1-100000]-") + 1
    assert problems_of(text) == [
        *(f"inv.yaml:{line}: node_groups[0].nodes: node name 'gpu{i}-' is not a valid host name" for i in range(1, 6)),
        f"inv.yaml:{line}: node_groups[0].nodes: and 99995 more problems here",
    ]
    # a group that repeats another group's 10,000 nodes
    text = MINIMAL.replace("gpu[01-04]", "gpu[1-10000]").replace("    addresses: 10.0.0.[21-24]\n", "")
    text = text.replace("partitions:\n", "  - name: again\n    nodes: gpu[1-10000]\n    cores_per_socket: 1\n"
                        "    real_memory_mb: 1000\npartitions:\n")
    found = problems_of(text)
    line = text.splitlines().index("    nodes: gpu[1-10000]", line) + 1
    assert f"inv.yaml:{line}: node_groups[1].nodes: node 'gpu5' is also in node_groups[0]" in found
    assert f"inv.yaml:{line}: node_groups[1].nodes: and 9995 more problems here" in found
    assert len(found) <= 12, found  # the nodes, and their slurmd ports (each field: five and a count)
