"""molecule/mutation_check.py: every mutation still applies to the tree as it is today, changes
what it says, and names tests that exist (the run itself needs the test bed: molecule/README)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from unit_helpers import module_from_file

from cluster_cli.smoke.registry import CHECK_NAMES

REPO = Path(__file__).resolve().parents[2]


MUTATION_CHECK = module_from_file("mutation_check", REPO / "molecule" / "mutation_check.py")
INVENTORY = "cluster_name: mc\nslurm:\n  conf:\n    SlurmdTimeout: 20\n"


@pytest.mark.parametrize("mutation", MUTATION_CHECK.MUTATIONS, ids=lambda mutation: mutation.name)
def test_mutation_applies_to_the_current_tree(mutation, tmp_path: Path) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(INVENTORY)
    tree = tmp_path / "tree"
    if mutation.patch is not None:
        path = mutation.patch[0]
        (tree / path).parent.mkdir(parents=True)
        (tree / path).write_text((REPO / path).read_text())
    mutation.apply(tree, inventory, tmp_path / "mutated.yaml")
    mutated = yaml.safe_load((tmp_path / "mutated.yaml").read_text())
    assert mutated["slurm"]["conf"] == {"SlurmdTimeout": 20, **mutation.slurm_conf}
    assert mutation.patch is not None or mutation.slurm_conf or mutation.inventory, f"{mutation.name} changes nothing"
    for key, value in mutation.inventory.items():
        assert mutated[key] == value
    if mutation.patch is not None:
        changed = (tree / mutation.patch[0]).read_text()
        assert changed != (REPO / mutation.patch[0]).read_text()
        assert mutation.patch[2] in changed
        if mutation.patch[0].endswith(".yml"):
            yaml.safe_load(changed)  # the mutant is still a playbook Ansible can load


@pytest.mark.parametrize("mutation", MUTATION_CHECK.MUTATIONS, ids=lambda mutation: mutation.name)
def test_mutation_names_tests_that_exist(mutation) -> None:
    assert mutation.tests
    checks = set(CHECK_NAMES)
    for test in mutation.tests:
        if test.startswith(MUTATION_CHECK.SMOKE):
            assert test[len(MUTATION_CHECK.SMOKE):] in checks, f"{mutation.name}: no smoke check {test}"
            continue
        file, name = test.split("::")
        source = (REPO / "molecule" / "tests" / file).read_text()
        assert re.search(rf"^def {name}\(", source, re.MULTILINE), f"{mutation.name}: no {test}"


def test_an_inventory_mutation_merges_into_the_mappings_and_keeps_the_rest(tmp_path: Path) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(INVENTORY + "priority:\n  type: multifactor\n  preemption: {enabled: true, mode: requeue}\n")
    mutation = MUTATION_CHECK.Mutation("m", "preemption off", ("test_x.py::test_x",),
                                       inventory={"priority": {"preemption": {"enabled": False}}})
    mutation.apply(tmp_path / "tree", inventory, tmp_path / "mutated.yaml")
    assert yaml.safe_load((tmp_path / "mutated.yaml").read_text())["priority"] == {
        "type": "multifactor", "preemption": {"enabled": False, "mode": "requeue"}}


def test_a_mutation_that_no_longer_matches_is_refused(tmp_path: Path) -> None:
    inventory = tmp_path / "cluster.yaml"
    inventory.write_text(INVENTORY)
    (tmp_path / "tree" / "roles").mkdir(parents=True)
    (tmp_path / "tree" / "roles" / "tasks.yml").write_text('mode: "0644"\n')
    stale = MUTATION_CHECK.Mutation("stale", "nothing", ("test_x.py::test_x",),
                                    patch=("roles/tasks.yml", 'mode: "0400"', 'mode: "0600"'))
    with pytest.raises(RuntimeError, match=r"roles/tasks.yml holds 0 copies"):
        stale.apply(tmp_path / "tree", inventory, tmp_path / "mutated.yaml")


def test_a_partial_run_keeps_the_earlier_rows_of_the_mutations_it_left_out() -> None:
    first, second = MUTATION_CHECK.MUTATIONS[:2]
    earlier = MUTATION_CHECK.report(
        "default", {test: "passed" for test in first.tests + second.tests},
        [MUTATION_CHECK.Result(first, True, {test: "failed" for test in first.tests}, 1.0),
         MUTATION_CHECK.Result(second, True, {test: "passed" for test in second.tests}, 1.0)], {}, "")
    assert "Mutants caught: 1 of 2; survived: " + second.name in earlier
    rerun = MUTATION_CHECK.report(
        "default", {test: "passed" for test in second.tests},
        [MUTATION_CHECK.Result(second, False, {}, 1.0)], {}, earlier)
    rows = [line for line in rerun.splitlines() if MUTATION_CHECK.ROW.match(line)]
    assert len(rows) == len(first.tests) + len(second.tests)
    assert next(MUTATION_CHECK.ROW.match(row)["removes"] for row in rows) == first.removes
    assert all("deploy refused" in row for row in rows if second.removes in row)
    assert "Mutants caught: 2 of 2." in rerun
