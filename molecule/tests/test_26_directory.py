"""The site's LDAP directory through SSSD (people.directory, roles/sssd) on every cluster host.

With CLUSTER_TB_DIRECTORY=1 the default scenario's bed has a fifth host, ``ldap``, that is no
cluster host: Debian's slapd set up by molecule/shared/tasks/directory.yml (StartTLS with a
throwaway CA, no anonymous bind, a read-only bind user) with ``dora`` (20001) and ``erin`` (20002)
in ``ldapteam`` (20000), and ``ldaplow`` (10001, below the inventory's ``min_id`` 20000). The
inventory's people.directory points every host's SSSD client at ``ldap://ldap``. Skipped without it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from conftest import ClusterView

pytestmark = pytest.mark.skipif(
    os.environ.get("CLUSTER_TB_DIRECTORY", "") not in ("1", "true", "yes"),
    reason="no directory on this bed: set CLUSTER_TB_DIRECTORY=1 (default scenario, molecule/shared/tasks/directory.yml)",
)

USERS = {"dora": 20001, "erin": 20002}
GROUP, GID = "ldapteam", 20000
BELOW_MIN_ID = "ldaplow"  # uid 10001 in the directory, under min_id


def test_the_directory_host_is_no_cluster_host(view: ClusterView) -> None:
    directory = view.cluster.inventory.people.directory
    assert directory is not None, "the bed's inventory has no people.directory"
    assert directory.uri == ["ldap://ldap"]
    assert "ldap" not in view.cluster.hosts
    assert "ldap" not in view.nodes


def test_directory_users_and_group_resolve_the_same_on_every_host(view: ClusterView) -> None:
    names = " ".join(USERS)
    found = {host: view.run(host, f"getent passwd {names}; getent group {GROUP}; id -nG dora").stdout
             for host in view.hosts}
    expected = ("".join(f"{name}:*:{uid}:{GID}:{name}:/home/{name}:/bin/bash\n" for name, uid in USERS.items())
                + f"{GROUP}:*:{GID}:{','.join(USERS)}\n{GROUP}\n")
    assert found == dict.fromkeys(view.hosts, expected)


def test_ids_below_min_id_are_not_resolved(view: ClusterView) -> None:
    found = {host: view.run(host, f"getent passwd {BELOW_MIN_ID} 10001", check=False).rc for host in view.hosts}
    assert found == dict.fromkeys(view.hosts, 2), "getent's 2: no such entry"


def test_sssd_runs_with_a_private_configuration_on_every_host(view: ClusterView) -> None:
    found = {host: view.run(host, "stat -c '%U:%G %a %n' /etc/sssd/sssd.conf /etc/sssd/conf.d/cluster-cli-bind.conf; "
                                  "systemctl is-active sssd; grep -rl ldap_default_authtok /etc", check=False).stdout
             for host in view.hosts}
    expected = ("root:root 600 /etc/sssd/sssd.conf\nroot:root 600 /etc/sssd/conf.d/cluster-cli-bind.conf\n"
                "active\n/etc/sssd/conf.d/cluster-cli-bind.conf\n")
    assert found == dict.fromkeys(view.hosts, expected), "the bind password belongs in the 0600 snippet only"


def test_a_directory_user_runs_a_job_on_every_node(view: ClusterView) -> None:
    nodes = len(view.nodes)
    out = view.run(view.submit, f"cd / && runuser -u dora -- timeout 120 srun -N{nodes} --ntasks-per-node=1 "
                                "--chdir=/tmp --mem=64 id -u").stdout
    assert out.split() == [str(USERS["dora"])] * nodes


def test_a_person_of_the_inventory_the_directory_also_knows_is_refused(view: ClusterView, tmp_path: Path) -> None:
    """One name, two accounts: a people user named as a directory user fails the deploy on every
    host, naming it (cluster_people's check, before any account is made; roles/sssd's own check
    covers a first deploy, where people runs before SSSD), and no host gets a local account of it."""
    document = yaml.safe_load(view.inventory_path.read_text())
    document["people"]["users"].append({"name": "dora", "uid": 5199})
    clash = tmp_path / "clash.yaml"
    clash.write_text(yaml.safe_dump(document, sort_keys=False))
    done = view.cli("deploy", "--full", "--build-dir", str(tmp_path / "build"), str(clash), check=False)
    message = " ".join((done.stdout + done.stderr).split())
    refusals = [f"{host}: user dora comes from the directory service (NSS), not /etc/passwd" for host in view.hosts]
    assert done.returncode != 0 and all(refusal in message for refusal in refusals), message[-3000:]
    local = {host: view.run(host, "grep -c '^dora:' /etc/passwd", check=False).stdout.strip() for host in view.hosts}
    assert local == dict.fromkeys(view.hosts, "0")
