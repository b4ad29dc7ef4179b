"""The secrets preflight of playbooks/site.yml: a host whose munge key or database password is not
the control node's stops the deploy before anything changes, naming the hosts, showing no secret.

Run for real with ansible-playbook on localhost: the roles' own entry points (munge key_check,
slurmdbd password_check), the hosts' files in a temporary directory (the roles' private path
variables point there), several local-connection hosts each with its own key file.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path

import pytest
import yaml
from role_runner import HOST, REPO, PlaybookRun, ansible_playbook, is_root, run_play

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="the munge role's files are root-owned (needs root)"),
]

HOSTS = ("ctl", "c1", "c2")


def _site_secrets_play(on: str = "every cluster host") -> dict:
    """playbooks/site.yml's secrets preflight play ``on`` its hosts, as it is (its hosts: the test's)."""
    plays = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text(encoding="utf-8"))
    play = next(play for play in plays if play["name"] == f"Secrets preflight on {on}")
    return {key: value for key, value in play.items() if key != "hosts"}


def _include(role: str, tasks_from: str) -> dict:
    return {"name": f"{role} {tasks_from}",
            "ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from, "public": True}}


def _write_key(path: Path, key: bytes) -> None:
    path.write_bytes(key)
    path.chmod(0o600)


def _shown(run: PlaybookRun, secret: bytes) -> list[str]:
    """The forms of ``secret`` that appear in the output (raw text, hex, base64)."""
    forms = {"hex": secret.hex(), "base64": base64.b64encode(secret).decode()}
    text = secret.decode("latin-1")
    if text.isprintable():
        forms["text"] = text
    output = run.stdout + run.stderr
    return [name for name, form in forms.items() if form[:24] in output]


def _key_check(tmp_path: Path, host_keys: dict[str, bytes | None], rotate: bool = False,
               tasks: tuple[str, ...] = ("key_check",), options: tuple[str, ...] = (),
               play: dict | None = None, unmarked: tuple[str, ...] = ()) -> tuple[PlaybookRun, bytes]:
    """The control node's key, and each host's key file (None: no key yet) with the marker of a key
    cluster-cli installed (not on the ``unmarked`` hosts: a key the munge package made), then the
    munge role's ``tasks`` (or ``play``)."""
    local_key, keys = secrets.token_bytes(1024), tmp_path / "hosts"
    keys.mkdir()
    _write_key(tmp_path / "munge.key", local_key)
    for host, key in host_keys.items():
        if key is not None:
            _write_key(keys / f"{host}.key", local_key if key == b"same" else key)
            if host not in unmarked:
                (keys / f"{host}.marker").touch()
    daemon = tmp_path / "munged"
    daemon.write_text("#!/bin/sh\n")  # stands in for munged: nothing runs it, no pid file names it
    extra = {
        "munge_key_src": str(tmp_path / "munge.key"),
        "munge_rotate_key": rotate,
        # one key file per host: extra vars are templated for each host
        "__munge_key_path": str(keys) + "/{{ inventory_hostname }}.key",
        "__munge_key_marker": str(keys) + "/{{ inventory_hostname }}.marker",
        "__munge_conf_dir": str(keys),
        "__munge_user": "root",
        "__munge_group": "root",
        # the "Munge restart" handler of a rotation: no munged of this machine is touched
        "common_service_manager": "standalone",
        "__munge_pidfile": str(tmp_path / "munged.pid"),
        "__munge_daemon": str(daemon),
        "__daemon_start_base": ["true"],
        "__munge_run_dir": str(tmp_path / "run"),
    }
    went_on = {"name": "After the check", "ansible.builtin.debug": {"msg": "went on"}}
    play = play or {"tasks": [_include("munge", name) for name in tasks] + [went_on]}
    return run_play(tmp_path / "work", play, {host: {} for host in host_keys}, extra, options), local_key


def test_hosts_with_another_key_fail_in_one_message_naming_them_and_no_key_is_shown(tmp_path: Path) -> None:
    other = secrets.token_bytes(1024)
    run, local_key = _key_check(tmp_path, {"ctl": b"same", "c1": other, "c2": other}, options=("-vvv",))
    assert run.returncode != 0, run.explain()
    _refused_naming_c1_c2(run, local_key, other)


def test_site_refuses_another_key_whatever_the_tags(tmp_path: Path) -> None:
    """site.yml's own play, run with --tags configure (the tags that would copy a key): the check runs."""
    other = secrets.token_bytes(1024)
    site = _site_secrets_play()
    run, local_key = _key_check(tmp_path, {"ctl": b"same", "c1": other, "c2": other}, play=site,
                                options=("--tags", "configure"))
    assert run.returncode != 0, run.explain()
    _refused_naming_c1_c2(run, local_key, other)


def _refused_naming_c1_c2(run: PlaybookRun, local_key: bytes, other: bytes) -> None:
    assert "The munge key on c1, c2 is not the one in" in run.text, run.explain()
    assert sum(run.recap(host)["failed"] for host in HOSTS) == 1, "one failure for every host, not one per host"
    assert "went on" not in run.stdout, "a host went on after the failed check"
    assert "--rotate-secrets" in run.text and "Restore the secrets directory" in run.text
    assert "ctl," not in run.text.split("The munge key on")[1][:20]
    for key in (local_key, other):
        assert not _shown(run, key), f"key bytes in the output: {_shown(run, key)}"
        assert hashlib.sha256(key).hexdigest() not in run.stdout.split("The munge key on")[1]


def test_hosts_with_the_same_key_or_none_yet_pass(tmp_path: Path) -> None:
    run, _ = _key_check(tmp_path, {"ctl": b"same", "c1": b"same", "c2": None})
    assert run.returncode == 0, run.explain()
    assert all(run.recap(host)["failed"] == 0 for host in HOSTS)


def test_a_key_cluster_cli_did_not_install_passes(tmp_path: Path) -> None:
    """The munge package's own key (Debian's postinst makes one), or one left by a purged cluster."""
    run, _ = _key_check(tmp_path, {"ctl": b"same", "c1": secrets.token_bytes(1024), "c2": b"same"},
                        unmarked=("c1",))
    assert run.returncode == 0, run.explain()


def test_rotating_skips_the_check_and_replaces_the_key_on_every_host(tmp_path: Path) -> None:
    other = secrets.token_bytes(1024)
    run, local_key = _key_check(tmp_path, {"ctl": other, "c1": other, "c2": None}, rotate=True,
                                tasks=("key_check", "configure"))
    assert run.returncode == 0, run.explain()
    for host in HOSTS:
        assert (tmp_path / "hosts" / f"{host}.key").read_bytes() == local_key, host
        assert (tmp_path / "hosts" / f"{host}.marker").is_file(), f"{host}: the key is not marked as the cluster's"
    assert "Stop before the restart: munged" in run.stdout and "Start again: munged" in run.stdout, "munged was not restarted after the key changed"
    assert (tmp_path / "run").is_dir(), "the restart did not make munged's runtime directory first"


STORAGE = "DbdPort=6819\nStorageType=accounting_storage/mysql\nStorageUser=slurm\nStoragePass={}\n"


def _password_check(tmp_path: Path, on_host: str | None, local: str, rotate: bool = False,
                    site: bool = False, marked: bool = True) -> PlaybookRun:
    """slurmdbd's password_check on a database host whose slurmdbd.conf has ``on_host`` (None: no
    file yet); with ``site``, site.yml's secrets play under --tags configure (the munge key: none yet)."""
    conf_dir = tmp_path / "etc"
    conf_dir.mkdir()
    if on_host is not None:
        (conf_dir / "slurmdbd.conf").write_text(STORAGE.format(on_host))
        (conf_dir / "slurmdbd.conf").chmod(0o600)
        if marked:
            (tmp_path / "slurmdbd.marker").touch()
    _write_key(tmp_path / "munge.key", secrets.token_bytes(1024))
    extra = {"slurmdbd_storage_pass": local, "slurmdbd_rotate_password": rotate,
             "slurm_common_conf_dir": str(conf_dir), "__slurmdbd_conf_marker": str(tmp_path / "slurmdbd.marker"),
             "munge_key_src": str(tmp_path / "munge.key"), "__munge_key_path": str(tmp_path / "no-key")}
    play = _site_secrets_play("the database host") if site else {"tasks": [_include("slurmdbd", "password_check")]}
    options = ("-vvv", "--tags", "configure") if site else ("-vvv",)
    return run_play(tmp_path / "work", play, {HOST: {}}, extra, options, groups={"slurm_database": [HOST]})


def _password() -> str:
    return secrets.token_urlsafe(32)


@pytest.mark.parametrize("site", [False, True], ids=["role", "site-with-tags"])
def test_a_database_host_with_another_password_fails_naming_it_and_shows_neither(tmp_path: Path, site: bool) -> None:
    local, on_host = _password(), _password()
    run = _password_check(tmp_path, on_host, local, site=site)
    assert run.returncode != 0, run.explain()
    assert f"The database password in {tmp_path / 'etc'}/slurmdbd.conf on {HOST} is not the one" in run.text, run.explain()
    assert "--rotate-secrets" in run.text
    output = run.stdout + run.stderr
    assert local not in output and on_host not in output, "a password reached the output"
    slurped = base64.b64encode(STORAGE.format(on_host).encode()).decode()
    assert slurped[:40] not in output, "slurmdbd.conf (with the password) reached the output"


@pytest.mark.parametrize("case", ["same", "absent"])
def test_a_database_host_with_the_same_password_or_none_yet_passes(tmp_path: Path, case: str) -> None:
    local = _password()
    run = _password_check(tmp_path, local if case == "same" else None, local)
    assert run.returncode == 0, run.explain()
    assert local not in run.stdout + run.stderr


def test_a_slurmdbd_conf_cluster_cli_did_not_install_passes(tmp_path: Path) -> None:
    """One an admin wrote before the first deploy, or one left by a purged cluster."""
    run = _password_check(tmp_path, _password(), _password(), marked=False)
    assert run.returncode == 0, run.explain()


def test_rotating_the_password_skips_the_check(tmp_path: Path) -> None:
    local, on_host = _password(), _password()
    run = _password_check(tmp_path, on_host, local, rotate=True)
    assert run.returncode == 0, run.explain()
    assert local not in run.stdout + run.stderr and on_host not in run.stdout + run.stderr




def test_site_checks_the_secrets_on_every_host_before_any_role_changes_one() -> None:
    plays = yaml.safe_load((REPO / "playbooks" / "site.yml").read_text(encoding="utf-8"))
    # the first play that applies a role whole (roles:, or import_role/include_role without tasks_from)
    first_role_play = next(index for index, play in enumerate(plays) if play.get("roles") or any(
        "tasks_from" not in call for task in play.get("pre_tasks", []) + play.get("tasks", [])
        for call in (task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role"),) if call))
    checks = [index for index, play in enumerate(plays)
              for task in play.get("tasks", [])
              for role in (task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role") or {},)
              if role.get("tasks_from") in ("key_check.yml", "password_check.yml")]
    assert len(checks) == 2 and max(checks) < first_role_play, "the secrets are checked after hosts were changed"
    key_play, password_play = (plays[index] for index in checks)
    assert key_play["hosts"] == "cluster" and password_play["hosts"] == "slurm_database"
    assert all("always" in play["tags"] and "when" not in play for play in (key_play, password_play))


@pytest.mark.parametrize("purge", [False, True])
def test_only_a_purge_forgets_that_the_key_is_the_clusters(tmp_path: Path, purge: bool) -> None:
    marker, daemon = tmp_path / "marker", tmp_path / "munged"
    marker.touch()
    daemon.write_text("#!/bin/sh\n")  # stands in for munged: nothing runs it, no pid file names it
    extra = {"munge_teardown_purge": purge, "__munge_key_marker": str(marker),
             "common_service_manager": "standalone", "__munge_pidfile": str(tmp_path / "munged.pid"),
             "__munge_daemon": str(daemon)}
    run = run_play(tmp_path / "work", {"tasks": [_include("munge", "teardown")]}, {HOST: {}}, extra)
    assert run.returncode == 0, run.explain()
    assert marker.exists() is not purge
