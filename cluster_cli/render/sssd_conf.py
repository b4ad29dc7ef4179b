"""sssd.conf for the SSSD client of the site's LDAP directory (people.directory), the same file on
every host, and the CA its TLS trusts. The bind password is not in it: roles/sssd writes that to a
0600 snippet of /etc/sssd/conf.d from the secret variables.

Written without a `services` line: Debian's sssd-common enables socket-activated responders (nss,
pam, ...) under systemd, and a responder named in `services` makes its socket unit fail. roles/sssd
adds the line on hosts without systemd, where the monitor must start them itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.site_files import read_ca
from cluster_cli.model import Directory
from cluster_cli.render.common import format_value, header, merge

SSSD_BUILD_DIR = "sssd"
SSSD_CONF = f"{SSSD_BUILD_DIR}/sssd.conf"
CA_FILE = f"{SSSD_BUILD_DIR}/cluster-cli-ldap-ca.pem"
# where roles/sssd puts them on the hosts (its vars/main.yml; sssd.conf names the CA)
SSSD_CONF_PATH = "/etc/sssd/sssd.conf"
HOST_CA_PATH = "/etc/sssd/cluster-cli-ldap-ca.pem"
DOMAIN = "cluster"


def domain_keys(directory: Directory) -> dict[str, Any]:
    """The domain section: the fields' keys, the defaults a cluster wants, then `options` over them."""
    keys: dict[str, Any] = {
        "id_provider": "ldap",
        "auth_provider": "ldap",
        "ldap_uri": ",".join(directory.uri),
        "ldap_search_base": directory.base_dn,
        "ldap_schema": directory.ldap_schema,
        # written even when false: its default differs between SSSD releases
        "ldap_id_use_start_tls": directory.start_tls,
        "min_id": directory.min_id,
        "max_id": directory.max_id,
        # a node that cannot reach the directory must not admit a password it once saw
        "cache_credentials": False,
        # jobs look up single users and groups; a full listing of a large directory is not wanted
        "enumerate": False,
    }
    if directory.ca_file is not None:
        keys |= {"ldap_tls_reqcert": "demand", "ldap_tls_cacert": HOST_CA_PATH}
    if directory.bind_dn is not None:
        keys["ldap_default_bind_dn"] = directory.bind_dn
    return merge(keys, directory.options)


def render_sssd(cluster: Cluster) -> dict[str, str]:
    """{build path: text}: sssd.conf and the CA, where the inventory has a directory."""
    directory = cluster.inventory.people.directory
    if directory is None:
        return {}
    sections = {"sssd": {"config_file_version": 2, "domains": DOMAIN}, f"domain/{DOMAIN}": domain_keys(directory)}
    lines = [header(cluster.name, "sssd.conf").rstrip("\n")]
    for section, keys in sections.items():
        lines += ["", f"[{section}]"] + [f"{key} = {format_value(keys[key], yes='true', no='false')}"
                                         for key in sorted(keys)]
    files = {SSSD_CONF: "\n".join(lines) + "\n"}
    if directory.ca_file is not None:
        files[CA_FILE] = read_ca(Path(directory.ca_file))
    return files

