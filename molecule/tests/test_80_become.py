"""Deploying as an unprivileged SSH user with passwordless sudo, so a site need not allow root
logins: cluster-cli's Ansible runs become root on such hosts (ansible_become), and its own SSH
commands (plan's probe, smoke, node states) run under `sudo -n`.

The bed's hosts get a user `tbadmin` with the bed's key and a sudoers rule (sudo from the bed's
mirror), as a site would set up its deployment user; the scenario's inventory names it in
node_access.admin_users (pam_slurm_adopt lets only root, the deploying user and the listed admins
log in to a compute host without a job). The hosts end as the scenario's inventory describes them:
only the user the deploy logs in as differs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import ClusterView, changed_count, long_checks_only

ADMIN = "tbadmin"
ADMIN_UID = 5103


def _deploy(view: ClusterView, inventory: Path) -> str:
    return view.cli("deploy", "--full", "--build-dir", str(view.build_dir), str(inventory)).stdout


def _as_admin(view: ClusterView, path: Path) -> Path:
    document = yaml.safe_load(view.inventory_path.read_text())
    if ADMIN not in document.get("node_access", {}).get("admin_users", []):
        pytest.skip(f"the scenario's inventory does not name {ADMIN} in node_access.admin_users")
    document["ssh"]["user"] = ADMIN
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def admin_inventory(view: ClusterView, tmp_path_factory: pytest.TempPathFactory) -> Path:
    public_key = Path(view.bed.run_dir / "id_ed25519.pub").read_text().strip()
    for host in view.hosts:
        view.run(host, "apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q sudo >/dev/null")
        view.add_login_user(host, ADMIN, ADMIN_UID, public_key)
        view.run(host, f"echo '{ADMIN} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{ADMIN} && chmod 0440 /etc/sudoers.d/{ADMIN}")
    return _as_admin(view, tmp_path_factory.mktemp("become") / "admin.yaml")


def test_a_deploy_as_a_sudo_user_changes_what_root_owns(view: ClusterView, admin_inventory: Path) -> None:
    long_checks_only()  # two full deploys of the bed, about 100 s
    compute = view.compute[0]
    view.run(compute, "chmod 0644 /etc/munge/munge.key")
    output = _deploy(view, admin_inventory)
    assert changed_count(output) > 0, output[-2000:]
    key = view.host(compute).file("/etc/munge/munge.key")
    assert (key.user, key.mode) == ("munge", 0o400), f"{compute}: munge.key {key.user} {key.mode:o}"
    again = _deploy(view, admin_inventory)
    assert changed_count(again) == 0, again[-3000:]


def test_plan_and_status_work_as_a_sudo_user(view: ClusterView, admin_inventory: Path) -> None:
    planned = view.cli("plan", "--json", "--build-dir", str(view.build_dir), str(admin_inventory), check=False)
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
    assert json.loads(planned.stdout)["changes"] == [], planned.stdout[-3000:]
    status = view.cli("status", str(admin_inventory), check=False)
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-3000:]


def test_the_sudo_user_is_not_root_on_the_hosts(view: ClusterView, admin_inventory: Path) -> None:
    """The deploys above went through sudo: the user itself has no root rights."""
    compute = view.compute[0]
    shown = view.run(compute, f"runuser -u {ADMIN} -- id -u").stdout.strip()
    assert shown != "0"
    denied = view.run(compute, f"runuser -u {ADMIN} -- cat /etc/munge/munge.key", check=False)
    assert denied.rc != 0
