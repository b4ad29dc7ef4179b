"""The site's LDAP directory (inventory: people.directory) as the SSSD client of every host sees
it: which files of the control node it needs, read and checked once (site_files); render/sssd_conf writes
the configuration, roles/sssd installs it.

The bind password is a site secret, not one cluster-cli generates: it is read from a file the
deploying user keeps private (0600), goes to the hosts only through the 0600 secret variables,
and is never shown.
"""

from __future__ import annotations

from pathlib import Path

from cluster_cli.model import Directory, Inventory
from cluster_cli.paths import default_secrets_dir
from cluster_cli.site_files import read_private_line

BIND_PASSWORD_FILE = "ldap_bind_password"
# The keys of sssd.conf's domain section that the fields of people.directory set: `options` may
# not set them (render/sssd_conf writes them).
MANAGED_KEYS = frozenset({
    "id_provider", "auth_provider", "ldap_uri", "ldap_search_base", "ldap_schema", "ldap_id_use_start_tls",
    "ldap_tls_reqcert", "ldap_tls_cacert", "ldap_default_bind_dn", "ldap_default_authtok",
    "ldap_default_authtok_type", "min_id", "max_id",
})


def uses_tls(directory: Directory) -> bool:
    return any(uri.startswith("ldaps://") for uri in directory.uri) or directory.start_tls


def clear_text_uris(directory: Directory) -> list[str]:
    """The ldap:// URIs a bind would cross in clear text (no StartTLS)."""
    return [] if directory.start_tls else [uri for uri in directory.uri if uri.startswith("ldap://")]


def bind_password_path(inventory: Inventory) -> Path | None:
    """Where the bind password is kept: `bind_password_file`, or the secrets directory's
    ldap_bind_password; None for an anonymous directory."""
    directory = inventory.people.directory
    if directory is None or directory.bind_dn is None:
        return None
    if directory.bind_password_file is not None:
        return Path(directory.bind_password_file).expanduser()
    configured = inventory.secrets.dir
    secrets = default_secrets_dir(inventory.cluster_name) if configured is None else Path(configured).expanduser()
    return secrets / BIND_PASSWORD_FILE


def read_bind_password(path: Path) -> str:
    """The bind password of ``path`` (site_files.read_private_line's checks)."""
    return read_private_line(path, "the bind password")
