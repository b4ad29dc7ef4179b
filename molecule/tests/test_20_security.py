"""Security of the deployed cluster: the munge key, slurmdbd.conf, ids, modes, and secrets in logs."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
import yaml
from conftest import ClusterView, changed_count

from cluster_cli.build import secrets_dir_for
from cluster_cli.paths import cluster_state_dir
from cluster_cli.secrets_store import DB_PASSWORD_FILE, MUNGE_KEY_FILE
from cluster_cli.site_directory import bind_password_path, read_bind_password


def _secrets_dir(view: ClusterView) -> Path:
    return secrets_dir_for(view.cluster, view.inventory_path)


def _sha256(view: ClusterView, host: str, path: str) -> str:
    return view.run(host, f"sha256sum {path}").stdout.split()[0]


def test_munge_key_is_the_same_private_file_everywhere(view: ClusterView) -> None:
    expected = hashlib.sha256((_secrets_dir(view) / MUNGE_KEY_FILE).read_bytes()).hexdigest()
    for name, host in view.hosts.items():
        key = host.file("/etc/munge/munge.key")
        assert (key.user, key.group, key.mode) == ("munge", "munge", 0o400), f"{name}: {key.user}:{key.group} {key.mode:o}"
        directory = host.file("/etc/munge")
        assert (directory.user, directory.mode) == ("munge", 0o700), f"{name}: /etc/munge {directory.mode:o}"
        assert _sha256(view, name, "/etc/munge/munge.key") == expected, f"{name}: another munge key"


def test_a_credential_from_one_host_decodes_on_every_other(view: ClusterView) -> None:
    names = list(view.hosts)
    for source, target in zip(names, names[1:] + names[:1]):
        credential = view.run(source, "munge -n").stdout.strip()
        decoded = view.run(target, f"echo {credential} | unmunge", check=False)
        assert decoded.rc == 0 and "STATUS:          Success" in decoded.stdout, (source, target, decoded.stdout)


def test_a_credential_made_with_another_key_is_refused(view: ClusterView) -> None:
    """The check above is not vacuous: a munged with a foreign key cannot talk to the cluster's."""
    host = view.compute[0]
    view.run(host, "install -d -m 0755 -o munge -g munge /run/foreign-munge && "
                   "dd if=/dev/urandom of=/run/foreign-munge/key bs=1024 count=1 status=none && "
                   "chown munge:munge /run/foreign-munge/key && chmod 0400 /run/foreign-munge/key && "
                   "runuser -u munge -- munged --key-file=/run/foreign-munge/key "
                   "--socket=/run/foreign-munge/sock --pid-file=/run/foreign-munge/pid "
                   "--seed-file=/run/foreign-munge/seed --log-file=/run/foreign-munge/log")
    try:
        credential = view.run(host, "munge -S /run/foreign-munge/sock -n").stdout.strip()
        decoded = view.run(view.controller, f"echo {credential} | unmunge", check=False)
        assert decoded.rc != 0 and "Invalid credential" in decoded.stdout + decoded.stderr
    finally:
        view.run(host, "kill $(cat /run/foreign-munge/pid); rm -rf /run/foreign-munge", check=False)


def test_slurm_conf_is_the_rendered_file_on_every_host(view: ClusterView) -> None:
    """In conf_dir; in configless mode, on a host that only runs slurmd, in each slurmd's conf-cache."""
    expected = hashlib.sha256((view.build_dir / "slurm" / "slurm.conf").read_bytes()).hexdigest()
    conf_dir = view.cluster.inventory.slurm.paths.conf_dir
    for name in view.hosts:
        if view.keeps_config_files(name):
            assert _sha256(view, name, f"{conf_dir}/slurm.conf") == expected, f"{name}: slurm.conf differs"
            continue
        for node in view.cluster.hosts[name].slurmd_nodes:
            cached = f"{view.conf_cache(node.name)}/slurm.conf"
            assert _sha256(view, name, cached) == expected, f"{name}: {cached} differs"


def test_slurmdbd_conf_is_private_to_slurm_and_only_on_the_database_host(view: ClusterView) -> None:
    if view.database is None:
        pytest.skip("accounting is disabled in this scenario")
    conf = f"{view.cluster.inventory.slurm.paths.conf_dir}/slurmdbd.conf"
    for name, host in view.hosts.items():
        found = host.file(conf)
        if name == view.database:
            assert (found.user, found.mode) == (view.cluster.inventory.slurm.user, 0o600), f"{found.mode:o}"
        else:
            assert not found.exists, f"{name} has {conf}"


def test_slurm_and_munge_have_the_same_ids_everywhere(view: ClusterView) -> None:
    inventory = view.cluster.inventory
    expected = {
        inventory.slurm.user: (inventory.slurm.uid, inventory.slurm.gid),
        "munge": (inventory.munge.uid, inventory.munge.gid),
        inventory.training.test_user: None,  # any id, but one id on every host
    }
    seen: dict[str, set[tuple[int, int]]] = {user: set() for user in expected}
    for name, host in view.hosts.items():
        for user, ids in expected.items():
            account = host.user(user)
            # the test user too: slurmctld looks the submitter up to launch a batch job
            assert account.exists, f"{name}: no user {user}"
            if ids is not None:
                assert (account.uid, account.gid) == ids, f"{name}: {user} is {account.uid}:{account.gid}"
            seen[user].add((account.uid, account.gid))
    assert all(len(ids) == 1 for ids in seen.values()), seen


def test_state_spool_and_log_directories_have_safe_owners_and_modes(view: ClusterView) -> None:
    paths = view.cluster.inventory.slurm.paths
    slurm_user = view.cluster.inventory.slurm.user
    for name, host in view.hosts.items():
        roles = view.cluster.hosts[name].roles
        expected = {paths.log_dir: (slurm_user, 0o750)}
        if "controller" in roles:
            expected[paths.state_dir] = (slurm_user, 0o700)
        if "compute" in roles:
            for node in view.cluster.hosts[name].slurmd_nodes:
                expected[f"{paths.spool_dir}/{node.name}"] = ("root", 0o755)
        for path, (owner, mode) in expected.items():
            found = host.file(path)
            assert found.is_directory, f"{name}: {path} missing"
            assert (found.user, found.mode) == (owner, mode), f"{name}: {path} {found.user} {found.mode:o}"
        world_writable = host.run(f"find {paths.log_dir} {paths.conf_dir} -perm -o+w ! -type l").stdout.split()
        assert not world_writable, f"{name}: world-writable {world_writable}"


def _secret_forms(view: ClusterView) -> dict[str, bytes]:
    secrets = _secrets_dir(view)
    key = (secrets / MUNGE_KEY_FILE).read_bytes()
    password = (secrets / DB_PASSWORD_FILE).read_bytes().strip()
    forms = {
        "munge key (base64)": base64.b64encode(key),
        "munge key (hex)": key.hex().encode(),
        "munge key (first 24 raw bytes)": key[:24],
        "database password": password,
    }
    bind_password = bind_password_path(view.cluster.inventory)  # CLUSTER_TB_DIRECTORY=1: the site's LDAP bind password
    if bind_password is not None:
        forms["LDAP bind password"] = read_bind_password(bind_password).encode()
    return forms


def test_next_deploy_repairs_loosened_secret_files_and_its_diff_and_logs_hold_no_secret(view: ClusterView) -> None:
    """Loosened modes on the munge key and slurmdbd.conf, and a drifted line beside the password in
    slurmdbd.conf: the next deploy, with --diff, puts all back, and neither its output (the drifted
    file's diff has the secret in its context) nor any deploy log (each 0600) holds a secret.
    (Ansible's check mode with the same drift: tests/deploy/test_10_deploy.py on the local cluster.
    One deploy here for both claims: each is a playbook run of about a minute on the bed.)"""
    conf_dir = view.cluster.inventory.slurm.paths.conf_dir
    conf = f"{conf_dir}/slurmdbd.conf"
    loosened = [(view.compute[0], "/etc/munge/munge.key", "0644", 0o400)]
    if view.database is not None:
        loosened.append((view.database, conf, "0644", 0o600))
        original = _sha256(view, view.database, conf)
        view.run(view.database, f"sed -i 's/^StoragePort=.*/StoragePort=3307/' {conf}")
    for host, path, mode, _ in loosened:
        view.run(host, f"chmod {mode} {path}")
        assert view.hosts[host].file(path).mode == int(mode, 8)
    deployed = view.deploy("--diff")
    assert changed_count(deployed.stdout) >= len(loosened), deployed.stdout[-3000:]
    for host, path, _, expected in loosened:
        assert view.hosts[host].file(path).mode == expected, f"{host}: {path} not repaired"
    logs = sorted((cluster_state_dir(view.cluster.name) / "logs").glob("*.log"))
    assert logs, "no deploy log written"
    texts = {"deploy --diff output": (deployed.stdout + deployed.stderr).encode()}
    for log in logs:
        assert log.stat().st_mode & 0o077 == 0, f"{log} is readable by others"
        texts[str(log)] = log.read_bytes()
    leaks = [f"{what} in {where}" for where, text in texts.items()
             for what, secret in _secret_forms(view).items() if secret in text]
    assert not leaks, leaks
    # the check is not vacuous: the password is really what slurmdbd.conf on the database holds,
    # and the deploy put the drifted line back
    if view.database is not None:
        assert _sha256(view, view.database, conf) == original, "the drifted slurmdbd.conf was not put back"
        held = view.run(view.database, f"cat {conf}").stdout
        assert f"StoragePass={_secret_forms(view)['database password'].decode()}" in held
    view.wait_nodes_idle(timeout=60)


def test_a_deploy_with_other_secrets_is_refused_naming_every_host(view: ClusterView, tmp_path: Path) -> None:
    """As from another control node, user or HOME: new secrets are generated, and the preflight
    refuses before any host changes, naming every host whose key is not this control node's."""
    document = yaml.safe_load(view.inventory_path.read_text())
    document["secrets"] = {"dir": str(tmp_path / "other-secrets")}
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(document, sort_keys=False))
    before = {name: _sha256(view, name, "/etc/munge/munge.key") for name in view.hosts}
    done = view.cli("deploy", "--build-dir", str(tmp_path / "build"), str(other), check=False)
    message = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1 and "The munge key on " in message, message[-3000:]
    refusal = message[message.index("The munge key on "):][:300]
    assert all(name in refusal for name in view.hosts), refusal
    assert "--rotate-secrets" in message
    after = {name: _sha256(view, name, "/etc/munge/munge.key") for name in view.hosts}
    assert after == before, "a host's munge key was replaced"
