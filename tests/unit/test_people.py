"""People (Linux users and groups): bad input refused at its file:line before any host is touched
(model.py's per-field checks, resolve/people.py's cross-checks), the document roles/common applies
(cluster_cli/people.py), and `plan`'s rows per host since the document the last deploy gave it.
The module that applies it runs for real in tests/ansible/test_cluster_people.py."""

from __future__ import annotations

from unit_helpers import BASE, edit, load, problem, problems

from cluster_cli.deployed import DeployedRecord, load_record
from cluster_cli.people_accounts import document_checksum, people_changes, people_document
from cluster_cli.plan import Impact, people_changes_by_host

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceKey alice@laptop"
PEOPLE = edit(BASE, "login: [head]\n", f"""\
login: [head]
people:
  groups:
    - name: ml
      gid: 5000
  users:
    - name: alice
      uid: 5001
      groups: [ml]
      ssh_keys: ["{KEY}"]
    - name: bob
      uid: 5002
      gid: 5000
      shell: /bin/sh
""")


def test_the_people_inventory_is_valid_and_gives_each_user_its_primary_group() -> None:
    assert problems(PEOPLE) == []
    document = people_document(load(PEOPLE).inventory)
    assert document["groups"] == [{"name": "ml", "gid": 5000}, {"name": "alice", "gid": 5001}]
    assert [(user["name"], user["uid"], user["group"], user["groups"], user["home"]) for user in document["users"]] == [
        ("alice", 5001, "alice", ["ml"], "/home/alice"), ("bob", 5002, "ml", [], "/home/bob")]


def test_clashing_ids_and_names_are_refused_at_their_lines() -> None:
    text = edit(PEOPLE, "      uid: 5002\n      gid: 5000\n", "      uid:  5001\n      gid: 64030\n      remove_home: true\n")
    text = edit(text, "      groups: [ml]\n", "      groups: [ml, ops]\n")
    assert problems(text) == [
        problem(text, "groups: [ml, ops]", "people.users[0].groups[1]", "group 'ops' is not defined in people.groups"),
        problem(text, "uid:  5001", "people.users[1].uid", "UID 5001 is also user alice's"),
        problem(text, "gid: 64030", "people.users[1].gid", "GID 64030 is also slurm.gid"),
        problem(text, "remove_home: true", "people.users[1].remove_home",
                "only with state: absent (a present or locked user keeps its home)"),
    ]


def test_system_names_daemon_ids_and_bad_keys_are_refused() -> None:
    text = edit(PEOPLE, "    - name: bob\n      uid: 5002\n", "    - name: root\n      uid: 64031\n")
    found = problems(text)
    assert problem(text, "name: root", "people.users[1].name", "'root' is a system or daemon account's name on every host") in found
    assert problem(text, "uid: 64031", "people.users[1].uid", "UID 64031 is also munge.uid") in found
    # the model's own checks (reported before the cross-checks run)
    bad_key = edit(PEOPLE, f'"{KEY}"', '"command=\\"rm\\" ssh-ed25519 AAAA x"')
    assert any("people.users[0].ssh_keys[0]: not an OpenSSH public key line" in line for line in problems(bad_key))
    assert any("people.users[1].uid" in line and "greater than or equal to 1000" in line
               for line in problems(edit(PEOPLE, "uid: 5002", "uid: 999")))


def test_an_accounting_uid_must_be_the_persons() -> None:
    text = edit(PEOPLE, "accounting:\n  host: head\n", "accounting:\n  host: head\n  users:\n    - name: alice\n      uid: 6000\n")
    assert problems(text) == [
        problem(text, "uid: 6000", "accounting.users[0].uid", "UID 6000, but people.users gives alice UID 5001")]


def test_plan_lists_per_host_what_changes_since_the_document_it_was_given() -> None:
    cluster = load(PEOPLE)
    document = people_document(cluster.inventory)
    hosts = ["head", "box"]
    fresh = people_changes_by_host(cluster, hosts, DeployedRecord())
    assert [(change.host, change.impact) for change in fresh] == [("head", Impact.PEOPLE), ("box", Impact.PEOPLE)]
    assert fresh[0].detail == ("group ml: make (GID 5000); group alice: make (GID 5001); "
                               "user alice: make (UID 5001, group alice, groups ml); user bob: make (UID 5002, group ml)")
    record = DeployedRecord()
    record.remember_people(document, document_checksum(document), hosts)
    assert people_changes_by_host(cluster, hosts, record) == []

    changed = load(edit(edit(PEOPLE, "      shell: /bin/sh\n", "      shell: /bin/bash\n      state: locked\n"),
                        "    - name: alice\n      uid: 5001\n      groups: [ml]\n", "    - name: carol\n      uid: 5003\n"))
    rows = people_changes_by_host(changed, ["head"], record)
    assert [change.detail for change in rows] == [
        "group carol: make (GID 5003); user carol: make (UID 5003, group carol); "
        "user bob: state present -> locked, shell /bin/sh -> /bin/bash; "
        "user alice: not in the inventory: lock (its files stay)"]


def test_a_renumbered_user_is_shown_as_refused() -> None:
    before = people_document(load(PEOPLE).inventory)
    after = people_document(load(edit(PEOPLE, "uid: 5002", "uid: 5004")).inventory)
    assert people_changes(after, before) == [
        "user bob: UID 5002 -> 5004, group ml -> ml: refused by the deploy (an account is never renumbered)"]


def test_the_record_keeps_the_document_and_each_hosts_checksum(tmp_path) -> None:
    document = people_document(load(PEOPLE).inventory)
    record = load_record(tmp_path)
    record.remember_people(document, "sum1", ["head"])
    record.save()
    again = load_record(tmp_path)
    assert again.people_held("head") == ("sum1", document) and again.people_held("box") == (None, None)
    again.remember_people({"groups": [], "users": []}, "sum2", ["box"])
    assert again.people_held("head") == ("sum1", None)  # given an older document: not known any more
    again.forget(["head"])
    assert again.people_held("head") == (None, None)


def test_ids_and_names_every_debian_host_has_are_refused() -> None:
    text = edit(PEOPLE, "    - name: bob\n      uid: 5002\n      gid: 5000\n      shell: /bin/sh\n",
                "    - name: carol\n      uid: 65534\n")
    found = problems(text)
    assert any("people.users[1].uid" in line and "65534" in line for line in found), found
    text = edit(PEOPLE, "    - name: bob\n      uid: 5002\n      gid: 5000\n", "    - name: systemd-x\n      uid: 5002\n"
                "    - name: mysql\n      uid: 5003\n")
    assert problems(text) == [
        problem(text, "name: systemd-x", "people.users[1].name", "'systemd-x' is a system or daemon account's name on every host"),
        problem(text, "name: mysql", "people.users[2].name", "'mysql' is a system or daemon account's name on every host")]
    colon = edit(PEOPLE, "      shell: /bin/sh\n", "      shell: /bin/s:h\n")
    assert any("people.users[1].shell" in line and "cannot hold a ':'" in line for line in problems(colon))


def test_a_users_own_group_is_its_name_and_uid_even_where_a_group_has_that_gid() -> None:
    text = edit(PEOPLE, "      uid: 5001\n      groups: [ml]\n", "      uid: 5000\n      groups: [ml]\n")
    assert problems(text) == [problem(text, "uid: 5000", "people.users[0].uid", "GID 5000 is also group ml's")]


def test_plan_says_what_the_deploy_will_not_change() -> None:
    before = people_document(load(PEOPLE).inventory)
    moved = edit(edit(PEOPLE, "      gid: 5000\n      shell: /bin/sh\n", "      gid: 5000\n      shell: /bin/sh\n      home: /srv/bob\n"),
                 "    - name: ml\n      gid: 5000\n", "    - name: ml\n      gid: 5000\n")
    assert people_changes(people_document(load(moved).inventory), before) == [
        "user bob: home /home/bob -> /srv/bob: not moved by the deploy (its files stay where they are)"]
    regrouped = {**before, "groups": [{**before["groups"][0], "gid": 5005}, *before["groups"][1:]]}
    assert people_changes(regrouped, before)[0] == "group ml: GID 5000 -> 5005: refused by the deploy (a group is never renumbered)"
    locked = {**before, "users": [{**before["users"][0], "state": "locked"}, before["users"][1]]}
    assert people_changes({**before, "users": before["users"][1:]}, locked) == []  # a locked user who leaves stays locked
