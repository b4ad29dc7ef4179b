"""Generated secrets: created once, reused, private on disk, never shown."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from cluster_cli import paths
from cluster_cli.errors import ClusterCliError, RefusedError
from cluster_cli.secrets_store import DB_PASSWORD_FILE, MUNGE_KEY_BYTES, MUNGE_KEY_FILE, ensure_secrets, rotate_secrets


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_first_run_creates_private_secrets(tmp_path):
    directory = tmp_path / "state" / "secrets"
    secrets = ensure_secrets(directory)
    assert secrets.directory == directory
    assert mode(directory) == 0o700
    assert secrets.munge_key_path == directory / MUNGE_KEY_FILE
    assert secrets.db_password_path == directory / DB_PASSWORD_FILE
    assert mode(secrets.munge_key_path) == 0o600
    assert mode(secrets.db_password_path) == 0o600
    assert len(secrets.munge_key_path.read_bytes()) == MUNGE_KEY_BYTES == 1024
    assert sorted(path.name for path in directory.iterdir()) == [MUNGE_KEY_FILE, DB_PASSWORD_FILE], (
        "no temporary files left"
    )


def test_the_password_can_go_into_slurmdbd_conf(tmp_path):
    # slurmdbd.conf cannot quote: letters, digits, '-' and '_' only, long enough
    for index in range(20):
        password = ensure_secrets(tmp_path / str(index)).db_password()
        assert re.fullmatch(r"[A-Za-z0-9_-]{40,}", password), password


def test_secrets_are_generated_once_and_reused(tmp_path):
    first = ensure_secrets(tmp_path)
    key, password = first.munge_key_path.read_bytes(), first.db_password()
    stamps = (first.munge_key_path.stat().st_mtime_ns, first.db_password_path.stat().st_mtime_ns)
    second = ensure_secrets(tmp_path)
    assert second.munge_key_path.read_bytes() == key
    assert second.db_password() == password
    assert (second.munge_key_path.stat().st_mtime_ns, second.db_password_path.stat().st_mtime_ns) == stamps


def test_each_secret_is_made_only_when_missing(tmp_path):
    first = ensure_secrets(tmp_path)
    key = first.munge_key_path.read_bytes()
    first.db_password_path.unlink()
    second = ensure_secrets(tmp_path)
    assert second.munge_key_path.read_bytes() == key
    assert second.db_password()


def test_two_clusters_get_different_secrets(tmp_path):
    one, two = ensure_secrets(tmp_path / "one"), ensure_secrets(tmp_path / "two")
    assert one.munge_key_path.read_bytes() != two.munge_key_path.read_bytes()
    assert one.db_password() != two.db_password()


def test_too_open_permissions_are_tightened(tmp_path):
    secrets = ensure_secrets(tmp_path / "s")
    os.chmod(secrets.directory, 0o755)
    os.chmod(secrets.munge_key_path, 0o644)
    os.chmod(secrets.db_password_path, 0o660)
    ensure_secrets(tmp_path / "s")
    assert mode(secrets.directory) == 0o700
    assert mode(secrets.munge_key_path) == 0o600
    assert mode(secrets.db_password_path) == 0o600


def test_a_stricter_mode_is_left_alone(tmp_path):
    secrets = ensure_secrets(tmp_path)
    os.chmod(secrets.munge_key_path, 0o400)
    ensure_secrets(tmp_path)
    assert mode(secrets.munge_key_path) == 0o400


def test_the_password_file_newline_is_not_part_of_the_password(tmp_path):
    secrets = ensure_secrets(tmp_path)
    assert secrets.db_password_path.read_text().endswith("\n")
    assert "\n" not in secrets.db_password()


def test_repr_and_str_show_where_not_what(tmp_path):
    secrets = ensure_secrets(tmp_path)
    password = secrets.db_password()
    for text in (repr(secrets), str(secrets), f"{secrets}", repr([secrets])):
        assert password not in text
        assert str(tmp_path) in text
    assert repr(secrets) == f"ClusterSecrets(directory={str(tmp_path)!r})"


def test_a_short_munge_key_is_refused(tmp_path):
    (tmp_path / MUNGE_KEY_FILE).write_bytes(b"short")
    with pytest.raises(ClusterCliError, match="munge key is shorter than 32 bytes; remove it to regenerate"):
        ensure_secrets(tmp_path)


def test_an_unusable_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ClusterCliError) as caught:
        ensure_secrets(blocker / "secrets")
    assert str(caught.value) == f"secrets directory {blocker / 'secrets'}: Not a directory"


def test_state_paths_follow_xdg_state_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert paths.cluster_state_dir("c1") == tmp_path / "cluster-cli" / "c1"
    assert paths.default_build_dir("c1") == tmp_path / "cluster-cli" / "c1" / "build"
    assert paths.default_secrets_dir("c1") == tmp_path / "cluster-cli" / "c1" / "secrets"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert (
        paths.default_secrets_dir("c1")
        == tmp_path / "home" / ".local" / "state" / "cluster-cli" / "c1" / "secrets"
    )


# -- only our own files: a planted link or another user's file never becomes the cluster's key --------


def test_a_munge_key_that_is_a_symbolic_link_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"k" * 64)
    os.chmod(target, 0o644)
    directory = tmp_path / "secrets"
    directory.mkdir(mode=0o700)
    (directory / MUNGE_KEY_FILE).symlink_to(target)
    with pytest.raises(RefusedError, match=f"{directory / MUNGE_KEY_FILE}: not a regular file"):
        ensure_secrets(directory)
    assert mode(target) == 0o644, "the link's target was not touched"
    assert not (directory / DB_PASSWORD_FILE).exists(), "refused before anything was made"


def test_a_password_that_is_not_a_regular_file_is_refused(tmp_path):
    (tmp_path / DB_PASSWORD_FILE).mkdir()
    with pytest.raises(RefusedError, match="not a regular file"):
        ensure_secrets(tmp_path)


def test_a_secrets_directory_that_is_a_symbolic_link_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    (tmp_path / "secrets").symlink_to(real)
    with pytest.raises(RefusedError, match="not a directory"):
        ensure_secrets(tmp_path / "secrets")
    assert list(real.iterdir()) == [] and mode(real) == 0o755


def test_secrets_owned_by_another_user_are_refused(tmp_path, monkeypatch):
    secrets = ensure_secrets(tmp_path / "s")
    monkeypatch.setattr(os, "getuid", lambda: secrets.directory.stat().st_uid + 1)
    with pytest.raises(RefusedError, match="not by this user"):
        ensure_secrets(tmp_path / "s")


def test_another_users_key_in_our_directory_is_refused(tmp_path):
    if os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    secrets = ensure_secrets(tmp_path / "s")
    os.chown(secrets.munge_key_path, 4242, 4242)
    with pytest.raises(RefusedError, match=f"{secrets.munge_key_path}: owned by uid 4242"):
        ensure_secrets(tmp_path / "s")


def test_the_home_directory_is_not_a_secrets_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(RefusedError, match="the home directory cannot be the secrets directory"):
        ensure_secrets(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_rotation_keeps_the_old_secrets_as_private_backups_and_makes_new_ones(tmp_path):
    old = ensure_secrets(tmp_path)
    key, password = old.munge_key_path.read_bytes(), old.db_password()
    new, backups = rotate_secrets(tmp_path, "20261124-090000")
    assert [path.name for path in backups] == [f"{MUNGE_KEY_FILE}.20261124-090000.old",
                                               f"{DB_PASSWORD_FILE}.20261124-090000.old"]
    assert backups[0].read_bytes() == key and backups[1].read_text().strip() == password
    assert all(mode(path) == 0o600 for path in (*backups, new.munge_key_path, new.db_password_path))
    assert new.munge_key_path.read_bytes() != key and new.db_password() != password
    assert len(new.munge_key_path.read_bytes()) == MUNGE_KEY_BYTES


def test_rotation_never_overwrites_a_backup_nor_follows_a_link(tmp_path):
    ensure_secrets(tmp_path)
    key = (tmp_path / MUNGE_KEY_FILE).read_bytes()
    (tmp_path / f"{DB_PASSWORD_FILE}.same.old").write_bytes(b"an earlier backup")
    with pytest.raises(RefusedError, match="exists already"):
        rotate_secrets(tmp_path, "same")
    assert (tmp_path / MUNGE_KEY_FILE).read_bytes() == key, "the key was moved before the refusal"
    assert (tmp_path / f"{DB_PASSWORD_FILE}.same.old").read_bytes() == b"an earlier backup"
    (tmp_path / DB_PASSWORD_FILE).unlink()
    (tmp_path / DB_PASSWORD_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RefusedError, match="symbolic link"):
        rotate_secrets(tmp_path, "later")
    assert (tmp_path / MUNGE_KEY_FILE).read_bytes() == key, "a secret was moved before the refusal"


def test_rotation_without_earlier_secrets_just_makes_them(tmp_path):
    new, backups = rotate_secrets(tmp_path / "fresh", "stamp")
    assert backups == () and new.munge_key_path.is_file()
