"""roles/sssd run for real with ansible-playbook on localhost: its configure step into a temporary
/etc/sssd (modes, the password only in its snippet and never in the output, what a later run takes
away), and its check that the directory knows none of the inventory's own users (the first deploy's
guard: people runs before SSSD), with a stand-in getent that answers for the directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from role_runner import ansible_playbook, run_tasks

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")


def _configure(tmp_path: Path, password: str, names_responders: bool):
    conf_dir = tmp_path / "etc-sssd"
    (conf_dir / "conf.d").mkdir(parents=True, exist_ok=True)
    (tmp_path / "sssd.conf").write_text("[domain/cluster]\nid_provider = ldap\n")
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    extra = {"__sssd_conf_dir": str(conf_dir), "sssd_conf_src": str(tmp_path / "sssd.conf"),
             "sssd_ca_src": str(tmp_path / "ca.pem"), "sssd_bind_password": password,
             "__sssd_names_responders": names_responders,
             # as after a fresh install: the restart handler stays out of this test (test_first_start_handlers)
             "__sssd_install": {"absent": ["sssd-ldap"]}}
    return conf_dir, run_tasks(tmp_path / "work", "sssd", ["configure"], extra, options=("--diff",))


def _files(conf_dir: Path) -> dict[str, str]:
    return {str(path.relative_to(conf_dir)): oct(path.stat().st_mode & 0o777)
            for path in sorted(conf_dir.rglob("*")) if path.is_file()}


def test_configure_writes_private_files_and_the_password_only_in_its_snippet(tmp_path: Path) -> None:
    conf_dir, run = _configure(tmp_path, "s3cret-bind", names_responders=True)
    assert run.returncode == 0, run.explain()
    assert _files(conf_dir) == {"conf.d/cluster-cli-bind.conf": "0o600", "conf.d/cluster-cli-responders.conf": "0o600",
                                "cluster-cli-ldap-ca.pem": "0o644", "sssd.conf": "0o600"}
    assert (conf_dir / "sssd.conf").read_text() == (tmp_path / "sssd.conf").read_text()
    assert (conf_dir / "cluster-cli-ldap-ca.pem").read_text() == (tmp_path / "ca.pem").read_text()
    assert (conf_dir / "conf.d/cluster-cli-responders.conf").read_text() == "[sssd]\nservices = nss, pam\n"
    assert "ldap_default_authtok = s3cret-bind" in (conf_dir / "conf.d/cluster-cli-bind.conf").read_text()
    assert [path for path in conf_dir.rglob("*") if path.is_file() and "s3cret-bind" in path.read_text()] == [
        conf_dir / "conf.d/cluster-cli-bind.conf"]
    assert "s3cret-bind" not in run.stdout + run.stderr


def test_configure_takes_away_a_password_no_longer_set_and_the_responders_under_systemd(tmp_path: Path) -> None:
    _configure(tmp_path, "s3cret-bind", names_responders=True)
    conf_dir, run = _configure(tmp_path, "", names_responders=False)
    assert run.returncode == 0, run.explain()
    assert _files(conf_dir) == {"cluster-cli-ldap-ca.pem": "0o644", "sssd.conf": "0o600"}


def _check(tmp_path: Path, directory_knows: list[str], local_users: list[str]):
    tmp_path.mkdir(parents=True, exist_ok=True)
    getent = tmp_path / "getent"
    known = " ".join(directory_knows)
    getent.write_text(f'#!/bin/sh\n[ "$1 $2 $3" = "-s sss passwd" ] || exit 9\nfor n in {known}; do [ "$4" = "$n" ] && exit 0; done\nexit 2\n')
    getent.chmod(0o755)
    return run_tasks(tmp_path / "work", "sssd", ["local_users_check"],
                     {"__sssd_getent": str(getent), "sssd_local_users": local_users})


def test_a_local_user_the_directory_knows_too_fails_the_host_naming_it(tmp_path: Path) -> None:
    run = _check(tmp_path, ["dora", "erin"], ["alice", "dora"])
    assert run.returncode != 0
    assert "testhost: the directory also knows dora, which people.users makes a local account of" in run.text, run.explain()


def test_local_users_the_directory_does_not_know_pass(tmp_path: Path) -> None:
    assert _check(tmp_path, ["dora"], ["alice", "bob"]).returncode == 0
    assert _check(tmp_path / "none", ["dora"], []).returncode == 0
