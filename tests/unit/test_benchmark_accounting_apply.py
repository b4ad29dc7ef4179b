"""benchmarks/accounting_apply.py's pure part: the 1,000 users and 50 accounts it adds make, by the
accounts module's comparison against the applied local cluster, exactly those adds, grouped into
one sacctmgr call per account and settings (the benchmark runs them on the real slurmdbd)."""

from __future__ import annotations

from sacctmgr_recorded import APPLIED
from unit_helpers import SHIPPED_INVENTORIES, benchmark_module

from cluster_cli import slurm_associations
from cluster_cli.loader import load_cluster
from cluster_cli.slurm_accounting import accounting_document


def test_the_added_users_and_accounts_are_adds_only_in_few_calls() -> None:
    document = accounting_document(load_cluster(SHIPPED_INVENTORIES["local"]))
    with benchmark_module("accounting_apply") as bench:
        added = bench.with_bench_entries(document, 1000, 50)
    state = slurm_associations.current_state(APPLIED)
    assert slurm_associations.diff(document, state) == []
    changes = slurm_associations.diff(added, state, remove=False)
    assert [change["action"] for change in changes] == ["add"] * 1050
    assert {change["kind"] for change in changes[:50]} == {"account"}
    argvs = slurm_associations.commands(changes, "local", True)
    # accounts one call per settings (4 shares), the users one call per account
    assert len(argvs) == 4 + 50
    assert sum(len(argv[4].split(",")) for argv in argvs if argv[2:4] == ["add", "user"]) == 1000
    removal = slurm_associations.diff(document, slurm_associations.current_state({
        **APPLIED, "assocs": APPLIED["assocs"] + "bench-a00|||research|1||||||||\n" + "bench-a00|bench-u0000|||1||||||||\n"}))
    assert [(change["kind"], change["action"], change["name"]) for change in removal] == [
        ("user", "remove", "bench-u0000"), ("account", "remove", "bench-a00")]
    added_state = slurm_associations.current_state({**APPLIED, "assocs": APPLIED["assocs"] + "".join(
        f"bench-a{index:02d}|||research|1||||||||\n" for index in range(50)) + "".join(
        f"bench-a{index % 50:02d}|bench-u{index:04d}|||1||||||||\n" for index in range(1000))})
    removals = slurm_associations.commands(slurm_associations.diff(document, added_state), "local", True)
    assert len(removals) == 50 + 1  # the users one call per account, the accounts (one parent) one
