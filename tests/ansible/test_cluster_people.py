"""plugins/modules/cluster_people.py, run for real by ansible-playbook against a temporary root (its
test-only ``root`` option: groupadd, useradd, usermod and userdel get ``--prefix ROOT``), so the
host's own accounts are never touched: people made, changed, locked, unlocked, deleted; ids never
renumbered; SSH keys kept in their block; links under a home never followed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from role_runner import HOST, PlaybookRun, ansible_playbook, is_root, run_play
from test_cluster_accounts import GROUP, PASSWD, fake_root

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="groupadd/useradd need root"),
    pytest.mark.skipif(shutil.which("useradd") is None, reason="useradd is not installed"),
]

KEY_A = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceKey alice@laptop"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceKey2 alice@desk"
MANAGED = "/var/lib/cluster-cli/people.json"


def alice(**changes: object) -> dict:
    user = {"name": "alice", "uid": 5001, "group": "alice", "groups": ["ml"], "shell": "/bin/bash",
            "home": "/home/alice", "ssh_keys": [KEY_A], "state": "present", "remove_home": False}
    return user | changes


def people(root: Path, users: list[dict], groups: list[dict] | None = None) -> dict:
    default = [{"name": "ml", "gid": 5000}, {"name": "ops", "gid": 5100}, {"name": "alice", "gid": 5001}]
    return {"root": str(root), "host": "{{ inventory_hostname }}", "managed_file": MANAGED,
            "groups": default if groups is None else groups, "users": users}


def _run(tmp_path: Path, args: dict, name: str, options: tuple[str, ...] = ()) -> tuple[PlaybookRun, dict]:
    result = tmp_path / f"{name}.json"
    play = {"tasks": [
        {"name": "people", "cluster_cli.slurm.cluster_people": args, "register": "out"},
        {"ansible.builtin.copy": {"content": "{{ out | to_json }}", "dest": str(result)}, "check_mode": False},
    ]}
    run = run_play(tmp_path / name, play, {HOST: {}}, {}, options=options)
    return run, json.loads(result.read_text()) if result.exists() else {}


def _entry(root: Path, database: str, name: str) -> list[str]:
    for line in (root / "etc" / database).read_text().splitlines():
        if line.split(":")[0] == name:
            return line.split(":")
    return []


def test_people_are_made_changed_locked_and_deleted_as_the_list_says(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    run, first = _run(tmp_path, people(root, [alice()]), "first")
    assert run.returncode == 0, run.explain()
    assert first["actions"] == ["group ml: made (GID 5000)", "group ops: made (GID 5100)", "group alice: made (GID 5001)",
                                "user alice: made (UID 5001)", "user alice: SSH keys written"]
    assert _entry(root, "passwd", "alice") == ["alice", "x", "5001", "5001", "", "/home/alice", "/bin/bash"]
    assert _entry(root, "group", "ml")[3] == "alice"
    keys = root / "home" / "alice" / ".ssh" / "authorized_keys"
    assert keys.read_text().splitlines()[1] == KEY_A
    assert (keys.stat().st_uid, keys.stat().st_mode & 0o777) == (5001, 0o600)
    assert (keys.parent.stat().st_uid, keys.parent.stat().st_mode & 0o777) == (5001, 0o700)
    assert json.loads((root / MANAGED.lstrip("/")).read_text()) == {"users": {"alice": 5001}}

    run, again = _run(tmp_path, people(root, [alice()]), "again")
    assert run.returncode == 0, run.explain()
    assert not again["changed"] and again["actions"] == []

    # The user's own key line stays; the inventory's block follows the list.
    keys.write_text(keys.read_text() + "ssh-rsa AAAAB3Nza own@key\n")
    changed = alice(groups=["ops"], shell="/bin/sh", ssh_keys=[KEY_B], state="locked")
    run, third = _run(tmp_path, people(root, [changed]), "changed")
    assert run.returncode == 0, run.explain()
    assert third["actions"] == ["user alice: groups ml -> ops", "user alice: shell /bin/bash -> /bin/sh",
                                "user alice: locked", "user alice: SSH keys written"]
    assert _entry(root, "group", "ml")[3] == "" and _entry(root, "group", "ops")[3] == "alice"
    assert _entry(root, "shadow", "alice")[7] == "1"  # expired: no login by password or key
    assert KEY_A not in keys.read_text() and KEY_B in keys.read_text() and "own@key" in keys.read_text()

    run, unlocked = _run(tmp_path, people(root, [alice(groups=["ops"], shell="/bin/sh", ssh_keys=[KEY_B])]), "unlock")
    assert run.returncode == 0, run.explain()
    assert unlocked["actions"] == ["user alice: unlocked"] and _entry(root, "shadow", "alice")[7] == ""

    # Out of the list: locked, never deleted; its home stays.
    run, left = _run(tmp_path, people(root, []), "left")
    assert run.returncode == 0, run.explain()
    assert left["actions"] == ["user alice: not in the inventory: locked"]
    assert _entry(root, "shadow", "alice")[7] == "1" and keys.exists()

    run, gone = _run(tmp_path, people(root, [alice(state="absent", remove_home=True)]), "absent")
    assert run.returncode == 0, run.explain()
    assert gone["actions"] == ["user alice: deleted with its home"]
    assert _entry(root, "passwd", "alice") == [] and not (root / "home" / "alice").exists()
    assert json.loads((root / MANAGED.lstrip("/")).read_text()) == {"users": {}}


def test_a_home_on_a_shared_file_system_is_neither_made_nor_given_keys_here(tmp_path: Path) -> None:
    """/home mounted from the cluster's NFS server (root_squash): the server makes the home and its keys;
    a client's root could do neither, so the client only makes the account."""
    root = fake_root(tmp_path)
    args = people(root, [alice()]) | {"shared_paths": ["/home"]}
    run, first = _run(tmp_path, args, "first")
    assert run.returncode == 0, run.explain()
    assert first["actions"][-1] == "user alice: made (UID 5001; its home is the file server's)", first["actions"]
    assert "user alice: SSH keys written" not in first["actions"]
    assert _entry(root, "passwd", "alice")[5] == "/home/alice" and not (root / "home" / "alice").exists()
    run, again = _run(tmp_path, args, "again")
    assert run.returncode == 0 and again["actions"] == [], run.explain()
    # a home elsewhere is made here, with its keys, as before
    bob = alice(name="bob", uid=5002, group="ml", home="/srv/bob")
    run, other = _run(tmp_path, people(root, [alice(), bob]) | {"shared_paths": ["/home", "/srv/bobby"]}, "other")
    assert run.returncode == 0, run.explain()
    assert other["actions"] == ["user bob: made (UID 5002)", "user bob: SSH keys written"], other["actions"]


def test_an_account_with_other_ids_fails_naming_host_account_and_both_ids_and_nothing_changes(tmp_path: Path) -> None:
    root = fake_root(tmp_path, PASSWD + "alice:x:1001:1001::/home/alice:/bin/bash\nbob:x:5002:5002::/:/bin/sh\n",
                     GROUP + "alice:x:1001:\nml:x:4000:\n")
    before = [(root / "etc" / name).read_text() for name in ("passwd", "group", "shadow")]
    users = [alice(), alice(name="carol", uid=5002, group="ml", ssh_keys=[])]
    run, _ = _run(tmp_path, people(root, users, [{"name": "ml", "gid": 5000}]), "refused")
    assert run.returncode != 0
    assert (f"{HOST}: group ml has GID 4000 here, the inventory gives 5000; user alice has UID 1001 and GID 1001 here, "
            "the inventory gives UID 5001 and GID 1001; UID 5002 (user carol) is user bob's here. An account is never "
            "renumbered") in run.text
    assert [(root / "etc" / name).read_text() for name in ("passwd", "group", "shadow")] == before
    assert not (root / MANAGED.lstrip("/")).exists()


def test_check_mode_reports_and_changes_nothing(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    run, result = _run(tmp_path, people(root, [alice()]), "check", options=("--check",))
    assert run.returncode == 0, run.explain()
    assert "user alice: made (UID 5001)" in result["actions"] and result["changed"]
    assert (root / "etc" / "passwd").read_text() == PASSWD and (root / "etc" / "group").read_text() == GROUP


def test_a_link_or_a_fifo_under_a_home_is_not_followed_or_read(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    run, _ = _run(tmp_path, people(root, [alice(ssh_keys=[])]), "first")
    assert run.returncode == 0, run.explain()
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.symlink(target, root / "home" / "alice" / ".ssh")
    run, _ = _run(tmp_path, people(root, [alice()]), "link")
    assert run.returncode != 0
    assert "user alice: " in run.text and "nothing under a home is followed as a link" in run.text
    assert list(target.iterdir()) == []
    (root / "home" / "alice" / ".ssh").unlink()
    (root / "home" / "alice" / ".ssh").mkdir()
    os.mkfifo(root / "home" / "alice" / ".ssh" / "authorized_keys")  # a read would hang the deploy
    run, _ = _run(tmp_path, people(root, [alice()]), "fifo", options=("--check",))
    assert run.returncode != 0 and "only a plain file" in run.text


def test_a_site_account_of_a_name_the_module_never_made_is_neither_deleted_nor_locked(tmp_path: Path) -> None:
    root = fake_root(tmp_path, PASSWD + "dave:x:6000:6000::/home/dave:/bin/sh\ncarol:x:7777:7777::/:/bin/sh\n",
                     GROUP + "dave:x:6000:\ncarol:x:7777:\n")
    managed = root / MANAGED.lstrip("/")
    managed.parent.mkdir(parents=True)
    managed.write_text(json.dumps({"users": {"carol": 5003}}))  # a carol the module made once, since gone
    run, result = _run(tmp_path, people(root, [alice(name="dave", uid=6000, group="dave", state="absent",
                                                     remove_home=True)], []), "absent")
    assert run.returncode == 0, run.explain()
    assert result["actions"] == [] and _entry(root, "passwd", "dave") and _entry(root, "shadow", "carol")[7] == ""
    assert json.loads(managed.read_text()) == {"users": {}}
