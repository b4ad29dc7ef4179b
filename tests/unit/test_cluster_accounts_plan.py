"""plugins/modules/cluster_accounts.py's pure parts: what it plans from the databases and the argv it runs
(the module itself runs for real in tests/ansible/test_cluster_accounts.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "cluster_accounts", Path(__file__).resolve().parents[2] / "plugins" / "modules" / "cluster_accounts.py"
)
M = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(M)

USERS = {"root": ("0", "0"), "nobody": ("65534", "65534"), "smoke": ("64090", "64090")}
GROUPS = {"root": "0", "nogroup": "65534", "smoke": "64090"}


def params(**changes: object) -> dict:
    base = {"host": "h1", "mismatch_hint": "Fix it.", "taken_hint": "Choose.", "kept_note": "why",
            "groups": [{"name": "smoke", "gid": 64090}], "users": [{"name": "smoke", "uid": 64090, "group": "smoke"}]}
    return base | changes


def test_ids_compare_as_numbers_whatever_their_type() -> None:
    # getent gives strings; the wanted ids come as ints (defaults) or strings (extra vars).
    for uid, gid in ((64090, 64090), ("64090", "64090"), ("064090", " 64090")):
        p = params(groups=[{"name": "smoke", "gid": gid}], users=[{"name": "smoke", "uid": uid, "group": "smoke"}])
        assert M.plan(p, USERS, GROUPS) == ([], [], [])


def test_every_strict_problem_is_named_at_once() -> None:
    p = params(groups=[{"name": "smoke", "gid": 7}], users=[{"name": "smoke", "uid": 8, "group": "smoke"}])
    with pytest.raises(M.Refused) as refused:
        M.plan(p, USERS, GROUPS)
    assert str(refused.value) == (
        "h1: group smoke has GID 64090, expected 7; user smoke has UID 64090, expected 8; "
        "user smoke has primary GID 64090, expected 7. Fix it."
    )


def test_an_id_is_looked_for_only_for_an_account_still_to_be_created() -> None:
    p = params(groups=[{"name": "new", "gid": 0}], users=[{"name": "new", "uid": "0", "group": "new"}])
    with pytest.raises(M.Refused) as refused:
        M.plan(p, USERS, GROUPS)
    assert str(refused.value) == (
        "h1: GID 0 belongs to group root, so group new cannot be created with it; "
        "UID 0 belongs to user root, so user new cannot be created with it. Choose."
    )


def test_a_negative_or_non_numeric_id_is_refused() -> None:
    for bad in (-1, "abc", ""):
        with pytest.raises(M.Refused):
            M.plan(params(groups=[{"name": "g", "gid": bad}], users=[]), USERS, GROUPS)


def test_the_commands_are_argument_lists() -> None:
    user = {"name": "smoke", "uid": 64090, "group": "smoke", "create_home": "true", "shell": "/bin/bash",
            "comment": "a; rm -rf /", "system": False}
    assert M.useradd_argv(user, "/") == ["useradd", "--uid", "64090", "--gid", "smoke", "--create-home",
                                         "--shell", "/bin/bash", "--comment", "a; rm -rf /", "smoke"]
    assert M.groupadd_argv({"name": "munge", "gid": "64031", "system": True}, "/tmp/r") == [
        "groupadd", "--gid", "64031", "--system", "--prefix", "/tmp/r", "munge"]
