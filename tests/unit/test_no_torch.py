"""training.torch_version: null — an environment without torch, and a smoke suite that says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster_cli.ansible.variables import cluster_variables
from cluster_cli.errors import InventoryError
from cluster_cli.loader import load_cluster_text
from cluster_cli.secrets_store import ensure_secrets
from cluster_cli.smoke import CHECKS, Verdict, run_smoke
from cluster_cli.smoke.slurm import User
from cluster_cli.smoke_control.inventory_targets import smoke_target

REPO = Path(__file__).resolve().parents[2]
LOCAL = (REPO / "inventories/local/inventory.yaml").read_text()


def _with_training(extra: str) -> str:
    assert "\ntraining:\n" in LOCAL
    return LOCAL.replace("\ntraining:\n", f"\ntraining:\n{extra}", 1)


def test_null_torch_version_installs_no_torch_and_skips_the_training_checks(tmp_path: Path) -> None:
    secrets = ensure_secrets(tmp_path / "secrets")
    cluster = load_cluster_text(_with_training("  torch_version: null\n"), "inv.yaml")
    assert cluster_variables(cluster, Path("/build"), secrets)["training_env_torch_version"] == ""
    assert smoke_target(cluster).torch_installed is False
    default = load_cluster_text(LOCAL, "inv.yaml")
    assert cluster_variables(default, Path("/build"), secrets)["training_env_torch_version"] == "2.13.0"
    assert smoke_target(default).torch_installed is True


def test_a_torch_version_must_look_like_one() -> None:
    with pytest.raises(InventoryError, match=r"training\.torch_version"):
        load_cluster_text(_with_training("  torch_version: latest and greatest\n"), "inv.yaml")


def test_training_checks_skip_with_the_reason_without_running_a_job(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """Only the skip path is exercised: every torch check is answered before any job is started."""
    cluster = load_cluster_text(_with_training("  torch_version: null\n"), "inv.yaml")
    target = smoke_target(cluster)
    target.work_dir = tmp_path
    torch_checks = [check.name for check in CHECKS if check.needs_torch]
    assert torch_checks
    started: list[str] = []

    class FakeSession:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.cwd = None

        def show_config(self) -> dict[str, str]:
            return {}

        def cancel_by_name_prefix(self, prefix: str) -> None:
            started.append(f"cancel {prefix}")

    from cluster_cli.smoke import suite
    monkeypatch.setattr(suite, "SlurmSession", FakeSession)
    monkeypatch.setattr(suite, "ensure_user", lambda *args: (User("smoke", 0, 0, "/tmp"), False))
    monkeypatch.setattr(suite, "_unusable_nodes", lambda session, nodes: {})
    monkeypatch.setattr(suite, "_run_one", lambda check, ctx: started.append(check.name))
    report = run_smoke(target, torch_checks)
    assert [result.verdict for result in report.results] == [Verdict.SKIP] * len(torch_checks)
    assert all("training.torch_version: null" in result.reason for result in report.results)
    assert not [name for name in started if not name.startswith("cancel")]
