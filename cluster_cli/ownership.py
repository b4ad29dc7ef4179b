"""Whose cluster each host holds: no verb changes a host, or Slurm's state, that this inventory's
cluster does not own.

A host belongs to another cluster when it is claimed (a Slurm daemon runs there, or cluster-cli
installed its munge key: the marker roles/munge leaves on every host) and its slurm.conf names
another ClusterName, or when the slurmctld answering there is another cluster's. A host whose
secrets cluster-cli installed but which are not this control node's is refused too: another
machine, user or HOME deployed it, and a drain, a requeue or a stop from here would act on a
cluster this control node cannot vouch for. A host with nothing of any cluster on it is fresh.

The evidence comes from the probe agent (``owner`` request and answer, probe/agent.py); secrets
are compared by checksum on the host and only the verdict comes back. Under
``deploy --rotate-secrets`` the secrets' verdicts are not held against a host: the rotation is
the documented way to adopt hosts whose secrets were lost, and the cluster names still are.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_cli.cluster import Cluster, ManagedHost
from cluster_cli.errors import ClusterCliError
from cluster_cli.host_files import MUNGE_KEY_MARKER, MUNGE_KEY_PATH, SLURMDBD_CONF_MARKER
from cluster_cli.probe import HostProbe, probe_hosts

FOREIGN_ADVICE = ("Change that cluster with its own inventory (`cluster-cli teardown ITS_INVENTORY --purge` "
                  "frees the host), or give this cluster other hosts or other slurm.paths.")
SECRETS_ADVICE = ("Restore this cluster's secrets directory from its backup (docs/operations.md, \"Back up and "
                  "restore the secrets\"), or adopt the hosts with `cluster-cli deploy INVENTORY --rotate-secrets`.")


class ForeignCluster(ClusterCliError):
    """A host or controller holds another cluster, or secrets this control node did not make:
    refused before anything changed (exit 1, as plan's other conflicts)."""


@dataclass(frozen=True)
class ExpectedSecrets:
    """Checksums of this control node's secrets (None: not on this control node)."""

    munge_key_sha256: str | None = None
    db_password_sha256: str | None = None


def expected_secrets(munge_key: bytes | None, db_password: str | None) -> ExpectedSecrets:
    return ExpectedSecrets(
        hashlib.sha256(munge_key).hexdigest() if munge_key is not None else None,
        hashlib.sha256(db_password.encode("utf-8")).hexdigest() if db_password else None,
    )


def secrets_on_control_node(secrets_dir: Path) -> ExpectedSecrets:
    """The checksums of the secrets kept in ``secrets_dir``, read only: a verb that only checks
    ownership never makes secrets."""
    from cluster_cli.secrets_store import DB_PASSWORD_FILE, MUNGE_KEY_FILE
    key, password = secrets_dir / MUNGE_KEY_FILE, secrets_dir / DB_PASSWORD_FILE
    return expected_secrets(key.read_bytes() if key.is_file() else None,
                            password.read_text(encoding="ascii").strip() if password.is_file() else None)


def owner_request(cluster: Cluster, host: ManagedHost, secrets: ExpectedSecrets) -> dict[str, Any]:
    """The probe agent's ``owner`` request for ``host``."""
    conf_dir = cluster.inventory.slurm.paths.conf_dir
    dbd = {"path": f"{conf_dir}/slurmdbd.conf", "marker": SLURMDBD_CONF_MARKER, "want": secrets.db_password_sha256}
    return {
        "slurm_conf": f"{conf_dir}/slurm.conf",
        "munge_key": {"path": MUNGE_KEY_PATH, "marker": MUNGE_KEY_MARKER, "want": secrets.munge_key_sha256},
        "slurmdbd_conf": dbd if "database" in host.roles else None,
    }


def _claims(owner: dict[str, Any]) -> list[str]:
    """What on the host says that some cluster lives there."""
    found = [f"{daemon} runs there" for daemon in owner.get("daemons", [])]
    if owner.get("munge_key") not in (None, "unmarked"):
        found.append("cluster-cli installed its munge key")
    return found


def host_conflicts(cluster: Cluster, owner: dict[str, Any], rotating: bool) -> list[str]:
    """Why a host is not this cluster's to change: sentences whose ``{hosts}`` names the hosts
    found so (hosts with the same finding share one sentence); none for a host of this cluster."""
    ours = cluster.name.lower()
    answering, named = owner.get("answering_cluster_name"), owner.get("cluster_name")
    conf = f"{cluster.inventory.slurm.paths.conf_dir}/slurm.conf"
    claims = _claims(owner)
    if answering and answering != ours:
        return [f"{{hosts}}: the slurmctld running there answers for cluster '{answering}', not '{cluster.name}'. "
                f"Nothing was changed. {FOREIGN_ADVICE}"]
    if named and named != ours and claims:
        return [f"{{hosts}}: holds cluster '{named}' (its {conf} says ClusterName={named}; {', '.join(claims)}), "
                f"not '{cluster.name}'. Nothing was changed. {FOREIGN_ADVICE}"]
    secrets = (("munge key", owner.get("munge_key")),
               (f"database password in {cluster.inventory.slurm.paths.conf_dir}/slurmdbd.conf",
                owner.get("slurmdbd_password")))
    return [] if rotating else [
        f"The {name} on {{hosts}} is not the one in this control node's secrets directory (cluster-cli installed "
        f"it there; checksums compared, nothing is shown): another machine, user or HOME deployed it. Nothing was "
        f"changed. {SECRETS_ADVICE}" for name, verdict in secrets if verdict == "other"]


def conflicts(cluster: Cluster, probes: dict[str, HostProbe], rotating: bool = False) -> dict[str, list[str]]:
    """Each probed host that is not this cluster's, and the findings (host_conflicts); hosts that
    could not be probed are the caller's to report."""
    found = {}
    for name, probe in sorted(probes.items()):
        findings = host_conflicts(cluster, probe.owner, rotating) if probe.owner is not None else []
        if findings:
            found[name] = findings
    return found


def conflict_lines(found: dict[str, list[str]]) -> list[str]:
    """One line per finding, naming every host found so."""
    hosts: dict[str, list[str]] = {}
    for host, findings in found.items():
        for finding in findings:
            hosts.setdefault(finding, []).append(host)
    return [finding.replace("{hosts}", ", ".join(names)) for finding, names in hosts.items()]


def proven_ours(cluster: Cluster, probe: HostProbe) -> bool:
    """The host holds this cluster's slurm.conf and this control node's munge key: what a lost
    deploy record is recovered from."""
    owner = probe.owner or {}
    return owner.get("cluster_name") == cluster.name.lower() and owner.get("munge_key") == "ours"


def owner_requests(cluster: Cluster, secrets: ExpectedSecrets, hosts: list[str] | None = None) -> dict[str, Any]:
    """The ``owner`` request of each of ``hosts`` (default: every host)."""
    names = list(cluster.hosts) if hosts is None else hosts
    return {name: owner_request(cluster, cluster.hosts[name], secrets) for name in names}


def refuse_foreign(cluster: Cluster, probes: dict[str, HostProbe]) -> None:
    """ForeignCluster naming each probed host that is not this cluster's."""
    found = conflicts(cluster, probes)
    if found:
        raise ForeignCluster(" ".join(conflict_lines(found)))


def require_owned(cluster: Cluster, secrets_dir: Path, hosts: list[str] | None = None) -> None:
    """Probe ``hosts`` (default: every host) for their owner, against the secrets kept in
    ``secrets_dir``, and refuse_foreign. Hosts that do not answer are left to the verb (Ansible or
    Slurm reports them)."""
    requests = owner_requests(cluster, secrets_on_control_node(secrets_dir), hosts)
    refuse_foreign(cluster, probe_hosts(cluster, {name: {"owner": owner} for name, owner in requests.items()}))
