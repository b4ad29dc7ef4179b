"""plugins/modules/cluster_people.py's pure parts: a directory service's account is refused, not
adopted; only accounts the module made (same name and UID) are locked or deleted; the key block
keeps the user's own lines (the module runs for real in tests/ansible/test_cluster_people.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "cluster_people", Path(__file__).resolve().parents[2] / "plugins" / "modules" / "cluster_people.py")
M = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(M)


def host(users: dict, local: set[str] | None = None, expiry: dict | None = None) -> dict:
    return {"users": {name: {"uid": uid, "gid": uid, "home": f"/home/{name}", "shell": "/bin/sh"}
                      for name, uid in users.items()},
            "groups": {name: {"gid": uid, "members": set()} for name, uid in users.items()},
            "expiry": expiry or {}, "local_users": set(users) if local is None else local,
            "local_groups": set(users) if local is None else local}


def params(*users: dict) -> dict:
    return {"host": "c1", "root": "/", "groups": [{"name": user["name"], "gid": user["uid"]} for user in users],
            "users": [{"group": user["name"], "groups": [], "shell": "/bin/sh", "home": f"/home/{user['name']}",
                       "ssh_keys": [], "state": "present", **user} for user in users]}


def test_a_directory_services_account_is_refused_not_adopted() -> None:
    with pytest.raises(M.Refused, match="user alice comes from the directory service"):
        M.check(params({"name": "alice", "uid": 5001}), host({"alice": 5001}, local=set()))


def test_only_the_modules_own_accounts_are_locked_or_deleted() -> None:
    found = host({"carol": 7777, "dave": 6000, "erin": 5005})
    gone = params({"name": "dave", "uid": 6000, "state": "absent", "remove_home": True})
    gone["groups"] = []
    # carol was made as 5003 (now someone else's), dave never by the module, erin by it
    steps = M.commands(gone, found, {"carol": 5003, "erin": 5005})
    assert [argv for _, argv in steps] == [["usermod", "--expiredate", "1", "erin"]]
    assert M.managed_after(gone, found, {"carol": 5003, "erin": 5005, "dave": 6000}) == {"erin": 5005}
    assert [argv for _, argv in M.commands(gone, found, {"dave": 6000})] == [["userdel", "--remove", "dave"]]


def test_the_key_block_keeps_the_users_own_lines() -> None:
    current = "ssh-rsa AAAA own@key\n" + M.KEYS_BEGIN + "\nssh-ed25519 AAAA old\n" + M.KEYS_END + "\n"
    assert M.keys_text(current, ["ssh-ed25519 BBBB new"]) == (
        "ssh-rsa AAAA own@key\n" + M.KEYS_BEGIN + "\nssh-ed25519 BBBB new\n" + M.KEYS_END + "\n")
    assert M.keys_text(current, []) == "ssh-rsa AAAA own@key\n"


def test_a_directory_account_nss_does_not_enumerate_is_still_found_and_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # SSSD's default (enumerate = false): getpwall and getgrall list none of the directory's
    # accounts, getpwnam and getgrnam find each one; without the lookup by name the module would
    # make a local dana beside the directory's (names absent from this machine's /etc/passwd)
    import grp
    import pwd
    directory_user = pwd.struct_passwd(("dana", "*", 7101, 7101, "", "/home/dana", "/bin/bash"))
    directory_group = grp.struct_group(("dana", "*", 7101, []))
    monkeypatch.setattr(M.pwd, "getpwall", list)
    monkeypatch.setattr(M.grp, "getgrall", list)
    monkeypatch.setattr(M.pwd, "getpwnam", lambda name: {"dana": directory_user}[name])
    monkeypatch.setattr(M.pwd, "getpwuid", lambda uid: {7101: directory_user}[uid])
    monkeypatch.setattr(M.grp, "getgrnam", lambda name: {"dana": directory_group}[name])
    monkeypatch.setattr(M.grp, "getgrgid", lambda gid: {7101: directory_group}[gid])
    wanted = params({"name": "dana", "uid": 7101})
    found = M.read_host("/", wanted)
    assert found["users"]["dana"]["uid"] == 7101 and "dana" not in found["local_users"]
    with pytest.raises(M.Refused, match="user dana comes from the directory service"):
        M.check(wanted, found)
    # a UID the directory gives someone else is found by the lookup by id
    taken = params({"name": "frank", "uid": 7101})
    with pytest.raises(M.Refused, match=r"UID 7101 \(user frank\) is user dana's here"):
        M.check(taken, M.read_host("/", taken))
