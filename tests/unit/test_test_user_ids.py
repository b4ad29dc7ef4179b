"""training.test_user_uid/gid: the smoke user with the same ids on every host, and the role variables."""

from __future__ import annotations

from pathlib import Path

import pytest
from unit_helpers import BASE, REPO, edit, load, problem, problems

from cluster_cli.ansible.variables import cluster_variables
from cluster_cli.loader import load_cluster
from cluster_cli.secrets_store import ensure_secrets


def user_variables(text: str, tmp_path: Path, cluster=None) -> dict:
    cluster = cluster or load(text)
    generated = cluster_variables(cluster, tmp_path / "build", ensure_secrets(tmp_path / "secrets"))
    return {key: value for key, value in generated.items() if key.startswith(("training_env_test_user", "training_env_work_dir"))}


def test_defaults_are_fixed_ids_and_a_multi_host_cluster_is_strict(tmp_path: Path) -> None:
    training = load(BASE).inventory.training
    assert (training.test_user, training.test_user_uid, training.test_user_gid) == ("smoke", 64090, 64090)
    assert user_variables(BASE, tmp_path) == {
        "training_env_test_user": "smoke",
        "training_env_test_user_uid": 64090,
        "training_env_test_user_gid": 64090,
        "training_env_test_user_strict": True,
        "training_env_work_dir": "/srv/cluster-training",
    }


def test_the_local_one_host_cluster_keeps_an_existing_account(tmp_path: Path) -> None:
    cluster = load_cluster(REPO / "inventories" / "local" / "inventory.yaml")
    assert list(cluster.hosts) == ["localhost"]
    assert user_variables("", tmp_path, cluster)["training_env_test_user_strict"] is False


def test_ids_and_work_dir_from_the_inventory(tmp_path: Path) -> None:
    text = BASE + "training:\n  test_user: jobs\n  test_user_uid: 5000\n  test_user_gid: 5001\n  work_dir: /shared/smoke\n"
    assert user_variables(text, tmp_path) == {
        "training_env_test_user": "jobs",
        "training_env_test_user_uid": 5000,
        "training_env_test_user_gid": 5001,
        "training_env_test_user_strict": True,
        "training_env_work_dir": "/shared/smoke",
    }


@pytest.mark.parametrize(
    ("training", "snippet", "field", "message"),
    [
        ("  test_user_uid: 999\n", "test_user_uid: 999", "training.test_user_uid", "Input should be greater than or equal to 1000"),
        ("  test_user_gid: 2147483648\n", "test_user_gid: 2147483648", "training.test_user_gid", "Input should be less than or equal to 2147483647"),
        ("  test_user_uid: 64030\n", "test_user_uid: 64030", "training.test_user_uid", "64030 is also slurm.uid"),
        ("  test_user_gid: 64031\n", "test_user_gid: 64031", "training.test_user_gid", "64031 is also munge.gid"),
        ("  test_user: root\n", "test_user: root", "training.test_user", "must be an unprivileged user, not root"),
        ("  test_user: munge\n", "test_user: munge", "training.test_user", "'munge' is the munge user; the smoke jobs need an ordinary user"),
        ("  test_user: slurm\n", "test_user: slurm", "training.test_user", "'slurm' is slurm.user; the smoke jobs need an ordinary user"),
    ],
)
def test_bad_test_user_settings_name_the_field_and_line(training: str, snippet: str, field: str, message: str) -> None:
    text = BASE + "training:\n" + training
    assert problems(text) == [problem(text, snippet, field, message)]


def test_the_daemon_ids_follow_the_slurm_section_and_every_clash_is_reported() -> None:
    text = BASE + "slurm:\n  uid: 64090\n  gid: 64500\ntraining:\n  test_user: slurm\n  test_user_gid: 64500\n"
    assert problems(text) == [
        # test_user_uid is not written: the problem points at the training section (problems come in line order)
        problem(text, "training:", "training.test_user_uid", "64090 is also slurm.uid"),
        problem(text, "test_user: slurm", "training.test_user", "'slurm' is slurm.user; the smoke jobs need an ordinary user"),
        problem(text, "test_user_gid: 64500", "training.test_user_gid", "64500 is also slurm.gid"),
    ]
    moved = edit(text, "  test_user: slurm\n  test_user_gid: 64500\n", "  test_user_uid: 64091\n  test_user_gid: 64501\n")
    assert problems(moved) == []
