"""The site's LDAP directory (people.directory): the refusals at file:line, sssd.conf and its CA as
rendered, the variables and the secret variable of roles/sssd, its group, and what plan and the
bundle add for it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from unit_helpers import BASE, expected_problems, load, problems

from cluster_cli.ansible.variables import cluster_variables, secret_variables
from cluster_cli.build import write_build
from cluster_cli.bundle.packages import debian_packages, package_list
from cluster_cli.host_files import files_by_host
from cluster_cli.render.ansible_inventory import inventory_document
from cluster_cli.render.sssd_conf import CA_FILE, SSSD_CONF, render_sssd
from cluster_cli.secrets_store import ClusterSecrets

PASSWORD = "not-shown-anywhere"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A CA certificate and a private bind password file, as a site keeps them."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "ca.key"),
                    "-out", str(tmp_path / "ca.pem"), "-subj", "/CN=test-ca", "-days", "1"],
                   check=True, capture_output=True)
    password = tmp_path / "bind"
    password.write_text(PASSWORD + "\n")
    password.chmod(0o600)
    return tmp_path


def directory(site: Path, extra: str = "") -> str:
    return BASE + f"""people:
  directory:
    uri: [ldap://ldap1.example.test, ldaps://ldap2.example.test:636]
    base_dn: dc=example,dc=test
    ca_file: {site}/ca.pem
    bind_dn: cn=sssd,ou=services,dc=example,dc=test
    bind_password_file: {site}/bind
    min_id: 20000
    max_id: 29999
{extra}"""


def test_sssd_conf_holds_the_directory_and_never_the_password(site: Path) -> None:
    files = render_sssd(load(directory(site)))
    conf = files[SSSD_CONF]
    lines = set(conf.splitlines())
    assert {"[sssd]", "domains = cluster", "[domain/cluster]", "id_provider = ldap",
            "ldap_uri = ldap://ldap1.example.test,ldaps://ldap2.example.test:636",
            "ldap_search_base = dc=example,dc=test", "ldap_id_use_start_tls = true", "ldap_tls_reqcert = demand",
            "ldap_tls_cacert = /etc/sssd/cluster-cli-ldap-ca.pem", "ldap_default_bind_dn = cn=sssd,ou=services,dc=example,dc=test",
            "min_id = 20000", "max_id = 29999", "cache_credentials = false"} <= lines
    # the responders are socket-activated under systemd: roles/sssd adds `services` only without it
    assert not any(line.startswith("services") for line in lines)
    assert PASSWORD not in conf and "authtok" not in conf
    assert files[CA_FILE] == (site / "ca.pem").read_text()


def test_options_add_keys_and_null_deletes_a_default(site: Path) -> None:
    text = directory(site, "    options:\n      ldap_access_filter: (memberOf=cn=hpc,ou=groups,dc=example,dc=test)\n"
                           "      enumerate: null\n")
    conf = render_sssd(load(text))[SSSD_CONF]
    assert "ldap_access_filter = (memberOf=cn=hpc,ou=groups,dc=example,dc=test)" in conf.splitlines()
    assert "enumerate" not in conf


def test_no_directory_renders_nothing_and_leaves_the_sssd_group_empty(site: Path) -> None:
    assert render_sssd(load(BASE)) == {}
    assert inventory_document(load(BASE))["all"]["children"]["cluster"]["children"]["sssd"] == {"hosts": {}}
    members = inventory_document(load(directory(site)))["all"]["children"]["cluster"]["children"]["sssd"]["hosts"]
    assert set(members) == set(load(directory(site)).hosts)


def test_refused_at_their_lines(site: Path) -> None:
    (site / "open").write_text("pw\n")
    (site / "open").chmod(0o644)
    (site / "two").write_text("pw\nmore\n")
    (site / "two").chmod(0o600)
    (site / "nocert.pem").write_text("not a certificate\n")
    text = directory(site, "    options:\n      ldap_uri: ldap://elsewhere\n    start_tls: false\n")
    text = text.replace(f"ca_file: {site}/ca.pem", f"ca_file: {site}/nocert.pem")
    text = text.replace(f"bind_password_file: {site}/bind", f"bind_password_file: {site}/open")
    assert problems(text) == expected_problems(text, [
        ("nocert.pem", "people.directory.ca_file", f"{site}/nocert.pem holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
        ("/open", "people.directory.bind_password_file",
         f"{site}/open is readable by others (mode 0644): chmod 600 it"),
        ("ldap_uri: ldap://elsewhere", "people.directory.options.ldap_uri",
         "set by the fields of people.directory (uri, base_dn, ldap_schema, start_tls, ca_file, bind_dn, min_id, max_id); "
         "not an option"),
        ("    start_tls: false", "people.directory.start_tls",
         "ldap://ldap1.example.test without StartTLS would send the bind password and every lookup in clear text: "
         "set start_tls: true, use ldaps://, or set insecure: true"),
    ])
    two = directory(site).replace(f"{site}/bind", f"{site}/two")
    assert problems(two) == expected_problems(two, [
        ("/two", "people.directory.bind_password_file", f"{site}/two must hold the bind password on one line, without control characters"),
    ])
    insecure = directory(site, "    start_tls: false\n    insecure: true\n").replace("ldaps://ldap2.example.test:636", "ldap://ldap2")
    assert problems(insecure) == []


def test_tls_needs_a_ca_and_a_missing_password_file_says_where_to_put_it(site: Path, tmp_path: Path) -> None:
    text = directory(site).replace(f"    ca_file: {site}/ca.pem\n", "").replace(f"    bind_password_file: {site}/bind\n", "")
    text += f"secrets:\n  dir: {tmp_path}/secrets\n"
    assert problems(text) == expected_problems(text, [
        ("uri: [ldap://", "people.directory.uri", "TLS needs the CA that signed the servers' certificates: set ca_file"),
        ("bind_dn:", "people.directory.bind_dn",
         f"{tmp_path}/secrets/ldap_bind_password does not exist: put the bind password there (one line, chmod 600)"),
    ])
    anonymous = directory(site).replace("    bind_dn: cn=sssd,ou=services,dc=example,dc=test\n", "")
    assert problems(anonymous) == expected_problems(anonymous, [
        ("bind_password_file", "people.directory.bind_password_file", "a bind password without bind_dn: set bind_dn, or remove it"),
    ])


def test_people_ids_inside_the_directory_range_are_refused(site: Path) -> None:
    text = directory(site) + """  groups:
    - name: ml
      gid: 20500
  users:
    - name: alice
      uid: 21000
    - name: bob
      uid: 5002
      gid: 25000
    - name: carol
      uid: 5003
"""
    assert problems(text) == expected_problems(text, [
        ("gid: 20500", "people.groups[0].gid",
         "GID 20500 of group ml is inside the directory's id range 20000-29999 (people.directory min_id, max_id)"),
        ("uid: 21000", "people.users[0].uid",
         "UID 21000 of user alice is inside the directory's id range 20000-29999 (people.directory min_id, max_id)"),
        ("gid: 25000", "people.users[1].gid",
         "GID 25000 of user bob's own group is inside the directory's id range 20000-29999 (people.directory min_id, max_id)"),
    ])
    backwards = directory(site).replace("max_id: 29999", "max_id: 19999")
    assert problems(backwards) == expected_problems(backwards, [
        ("max_id: 19999", "people.directory.max_id", "19999 is below min_id 20000"),
    ])


def test_the_sssd_packages_names_are_reserved(site: Path) -> None:
    text = directory(site) + "  users:\n    - name: sssd\n      uid: 5001\n"
    assert problems(text) == expected_problems(text, [
        ("name: sssd", "people.users[0].name", "'sssd' is a system or daemon account's name on every host"),
    ])


def test_role_variables_and_the_password_only_in_the_secret_variables(site: Path, tmp_path: Path) -> None:
    text = directory(site) + "  users:\n    - name: alice\n      uid: 5001\n    - name: gone\n      uid: 5002\n      state: absent\n"
    cluster = load(text)
    secrets = ClusterSecrets(tmp_path, tmp_path / "munge.key", tmp_path / "db")
    variables = cluster_variables(cluster, tmp_path / "build", secrets)
    assert variables["sssd_conf_src"] == str(tmp_path / "build" / SSSD_CONF)
    assert variables["sssd_ca_src"] == str(tmp_path / "build" / CA_FILE)
    assert variables["sssd_local_users"] == ["alice"]
    assert PASSWORD not in yaml.safe_dump(variables)
    (tmp_path / "db").write_text("database\n")
    assert secret_variables(cluster, secrets)["sssd_bind_password"] == PASSWORD


def test_a_build_keeps_the_password_in_the_private_secret_variables_only(site: Path, tmp_path: Path) -> None:
    build = write_build(load(directory(site)), tmp_path / "build", tmp_path / "secrets")
    holding = [path for path in (tmp_path / "build").rglob("*") if path.is_file() and PASSWORD in path.read_text()]
    assert [path.name for path in holding] == ["secret_vars.yml"]
    assert os.stat(holding[0]).st_mode & 0o077 == 0
    assert (build.directory / CA_FILE).read_text() == (site / "ca.pem").read_text()


def test_plan_compares_sssd_conf_and_the_ca_and_the_bundle_carries_the_packages(site: Path) -> None:
    cluster = load(directory(site))
    rendered = render_sssd(cluster)
    paths = {item.path for item in files_by_host(cluster, rendered, b"k" * 32)["head"]}
    assert {"/etc/sssd/sssd.conf", "/etc/sssd/cluster-cli-ldap-ca.pem"} <= paths
    assert set(package_list("sssd_packages")) <= set(debian_packages(cluster))
    assert not set(package_list("sssd_packages")) & set(debian_packages(load(BASE)))
