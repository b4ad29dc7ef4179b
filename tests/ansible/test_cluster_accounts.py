"""plugins/modules/cluster_accounts.py, run for real by ansible-playbook: a host's fixed-id groups and users,
checked and created in one module run, never renumbered.

The module runs against a temporary root (its test-only ``root`` option: it reads ROOT/etc/passwd
and group and gives groupadd/useradd ``--prefix ROOT``), so the host's own accounts are never
touched; groupadd/useradd still need root. tests/ansible/test_test_user_role.py runs it through
roles/training_env on the host's own databases.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from role_runner import HOST, PlaybookRun, ansible_playbook, is_root, run_play

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="groupadd/useradd need root"),
    pytest.mark.skipif(shutil.which("useradd") is None, reason="useradd is not installed"),
]

PASSWD = """root:x:0:0:root:/root:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
slurm:x:64030:64030:their slurm:/var/lib/slurm:/bin/sh
"""
GROUP = """root:x:0:
nogroup:x:65534:
slurm:x:64030:
"""


def fake_root(tmp_path: Path, passwd: str = PASSWD, group: str = GROUP) -> Path:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text(passwd)
    (root / "etc" / "group").write_text(group)
    (root / "etc" / "shadow").write_text("".join(f"{line.split(':')[0]}:*:19000:0:99999:7:::\n" for line in passwd.splitlines()))
    (root / "etc" / "gshadow").write_text("".join(f"{line.split(':')[0]}:*::\n" for line in group.splitlines()))
    for name in ("passwd", "group", "shadow", "gshadow"):
        (root / "etc" / name).chmod(0o644 if name in ("passwd", "group") else 0o640)
    return root


def _databases(root: Path) -> tuple[str, str]:
    return (root / "etc" / "passwd").read_text(), (root / "etc" / "group").read_text()


def accounts(root: Path, **changes: object) -> dict:
    """slurm (exists with the wanted ids), munge (missing, non-strict) and smoke (missing, with a home)."""
    args = {
        "root": str(root),
        "host": "{{ inventory_hostname }}",
        "mismatch_hint": "Renumber the account by hand, or set the ids.",
        "taken_hint": "Choose free ids.",
        "kept_note": "munge's ids need not match across hosts",
        "groups": [
            {"name": "slurm", "gid": 64030, "system": True, "strict": True},
            {"name": "munge", "gid": 64031, "system": True, "strict": False},
            {"name": "smoke", "gid": 64090, "strict": True},
        ],
        "users": [
            {"name": "slurm", "uid": 64030, "group": "slurm", "system": True, "home": "/nonexistent",
             "create_home": False, "shell": "/usr/sbin/nologin", "strict": True},
            {"name": "munge", "uid": 64031, "group": "munge", "system": True, "home": "/nonexistent",
             "create_home": False, "shell": "/usr/sbin/nologin", "strict": False},
            {"name": "smoke", "uid": 64090, "group": "smoke", "home": "/home/smoke", "create_home": True,
             "shell": "/bin/bash", "comment": "cluster-cli smoke tests", "strict": True},
        ],
    }
    args.update(changes)
    return args


def _run(tmp_path: Path, args: dict, options: tuple[str, ...] = (), name: str = "work") -> tuple[PlaybookRun, dict]:
    result = tmp_path / f"{name}.json"
    play = {"tasks": [
        {"name": "accounts", "cluster_cli.slurm.cluster_accounts": args, "register": "out"},
        {"ansible.builtin.copy": {"content": "{{ out | to_json }}", "dest": str(result)}, "check_mode": False},
    ]}
    run = run_play(tmp_path / name, play, {HOST: {}}, {}, options=options)
    return run, json.loads(result.read_text()) if result.exists() else {}


def test_missing_groups_then_users_are_created_once(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    run, first = _run(tmp_path, accounts(root), name="first")
    assert run.returncode == 0, run.explain()
    assert first["changed"] and first["created"] == {"groups": ["munge", "smoke"], "users": ["munge", "smoke"]}
    passwd, group = _databases(root)
    assert "munge:x:64031:64031::/nonexistent:/usr/sbin/nologin\n" in passwd
    assert "smoke:x:64090:64090:cluster-cli smoke tests:/home/smoke:/bin/bash\n" in passwd
    assert "munge:x:64031:\n" in group and "smoke:x:64090:\n" in group
    home = root / "home" / "smoke"
    assert home.is_dir() and (home.stat().st_uid, home.stat().st_gid) == (64090, 64090)
    assert not (root / "nonexistent").exists()

    run, again = _run(tmp_path, accounts(root), name="again")
    assert run.returncode == 0, run.explain()
    assert not again["changed"] and again["created"] == {"groups": [], "users": []}
    assert _databases(root) == (passwd, group)


def test_an_existing_account_is_never_modified(tmp_path: Path) -> None:
    # slurm has the wanted ids but its own home, shell and comment: all kept.
    root = fake_root(tmp_path)
    run, result = _run(tmp_path, accounts(root, groups=accounts(root)["groups"][:1], users=accounts(root)["users"][:1]))
    assert run.returncode == 0, run.explain()
    assert not result["changed"] and result["created"] == {"groups": [], "users": []}
    assert _databases(root) == (PASSWD, GROUP)


def test_a_strict_account_with_other_ids_fails_and_nothing_is_created(tmp_path: Path) -> None:
    root = fake_root(tmp_path, PASSWD.replace("slurm:x:64030:64030", "slurm:x:998:64030"), GROUP.replace("slurm:x:64030", "slurm:x:997"))
    before = _databases(root)
    run, _ = _run(tmp_path, accounts(root))
    assert run.returncode != 0
    assert f"{HOST}: group slurm has GID 997, expected 64030; user slurm has UID 998, expected 64030. Renumber the account by hand, or set the ids." in run.text
    assert _databases(root) == before  # not even the missing munge and smoke


def test_a_strict_user_with_another_primary_group_fails(tmp_path: Path) -> None:
    root = fake_root(tmp_path, PASSWD.replace("slurm:x:64030:64030", "slurm:x:64030:65534"))
    run, _ = _run(tmp_path, accounts(root))
    assert run.returncode != 0
    assert f"{HOST}: user slurm has primary GID 65534, expected 64030." in run.text


def test_a_wanted_id_another_name_holds_fails_and_nothing_is_created(tmp_path: Path) -> None:
    root = fake_root(tmp_path, PASSWD + "other:x:64090:65534::/:/bin/sh\n", GROUP + "grp:x:64031:\n")
    before = _databases(root)
    run, _ = _run(tmp_path, accounts(root))
    assert run.returncode != 0
    assert (f"{HOST}: GID 64031 belongs to group grp, so group munge cannot be created with it; "
            "UID 64090 belongs to user other, so user smoke cannot be created with it. Choose free ids.") in run.text
    assert _databases(root) == before


@pytest.mark.parametrize("strict", [False, "false"])  # a templated string "false" is false, not a non-empty string
def test_a_non_strict_account_with_other_ids_is_kept_with_a_warning(tmp_path: Path, strict: object) -> None:
    root = fake_root(tmp_path, PASSWD + "munge:x:105:106::/nonexistent:/usr/sbin/nologin\n", GROUP + "munge:x:106:\n")
    args = accounts(root)
    args["groups"][1]["strict"] = args["users"][1]["strict"] = strict
    run, result = _run(tmp_path, args)
    assert run.returncode == 0, run.explain()
    kept = [f"{HOST}: group munge has GID 106, expected 64031: kept as it is (munge's ids need not match across hosts).",
            f"{HOST}: user munge has UID 105, expected 64031: kept as it is (munge's ids need not match across hosts).",
            f"{HOST}: user munge has primary GID 106, expected 64031: kept as it is (munge's ids need not match across hosts)."]
    assert result["kept"] == kept
    assert "[WARNING]: " + kept[1] in run.text
    passwd, group = _databases(root)
    assert "munge:x:105:106::" in passwd and "munge:x:106:\n" in group and "64031" not in passwd + group
    assert result["created"] == {"groups": ["smoke"], "users": ["smoke"]}


def test_a_strict_flag_left_out_means_strict(tmp_path: Path) -> None:
    root = fake_root(tmp_path, PASSWD.replace("slurm:x:64030:", "slurm:x:1:"))
    users = [{key: value for key, value in accounts(root)["users"][0].items() if key != "strict"}]
    run, _ = _run(tmp_path, accounts(root, groups=accounts(root)["groups"][:1], users=users))
    assert run.returncode != 0 and "user slurm has UID 1, expected 64030" in run.text


def test_check_mode_reports_what_it_would_create_and_creates_nothing(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    run, result = _run(tmp_path, accounts(root), options=("--check",))
    assert run.returncode == 0, run.explain()
    assert result["changed"] and result["created"] == {"groups": ["munge", "smoke"], "users": ["munge", "smoke"]}
    assert _databases(root) == (PASSWD, GROUP) and not (root / "home").exists()


def test_check_mode_still_fails_on_a_strict_mismatch(tmp_path: Path) -> None:
    root = fake_root(tmp_path, PASSWD.replace("slurm:x:64030:", "slurm:x:998:"))
    run, _ = _run(tmp_path, accounts(root), options=("--check",))
    assert run.returncode != 0 and f"{HOST}: user slurm has UID 998, expected 64030." in run.text


def test_a_primary_group_neither_wanted_nor_existing_is_refused(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    users = [accounts(root)["users"][2] | {"group": "nosuchgroup"}]
    run, _ = _run(tmp_path, accounts(root, groups=[], users=users))
    assert run.returncode != 0 and "its primary group nosuchgroup neither exists nor is among the groups to create" in run.text
    assert _databases(root) == (PASSWD, GROUP)
