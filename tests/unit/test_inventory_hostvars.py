"""The Ansible inventory writes what every host shares once, as the cluster group's vars: Ansible
must see the very hosts, groups and variables it saw when each host carried all its variables.

``ansible-inventory --list`` (hosts' variables merged with their groups', and every group's members)
is compared between the rendered inventory and the same document with every host's variables on
the host (render_ansible_inventory's output before the shared ones moved).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from unit_helpers import BASE, REPO, SHIPPED_INVENTORIES, edit, load

from cluster_cli.cluster import Cluster
from cluster_cli.loader import load_cluster
from cluster_cli.render.ansible_inventory import host_variables, inventory_document, render_ansible_inventory

ANSIBLE_INVENTORY = Path(sys.executable).with_name("ansible-inventory")

pytestmark = pytest.mark.skipif(not ANSIBLE_INVENTORY.exists(), reason="ansible-inventory is not installed")


def every_variable_on_its_host(cluster: Cluster) -> str:
    document = inventory_document(cluster)
    group = document["all"]["children"]["cluster"]
    del group["vars"]
    group["hosts"] = host_variables(cluster)
    return json.dumps(document, indent=2)


def ansible_sees(tmp_path: Path, name: str, text: str) -> dict:
    path = tmp_path / f"{name}.yml"
    path.write_text(text)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_INVENTORY_ENABLED="yaml")
    listed = subprocess.run([str(ANSIBLE_INVENTORY), "-i", str(path), "--list"], env=env,
                            capture_output=True, text=True, check=True)
    return json.loads(listed.stdout)


def mixed_cluster() -> Cluster:
    """A local host (no SSH user, no become), SSH hosts of one user, one of them on its own port."""
    text = edit(BASE, "    address: 10.0.0.2\n", "    address: 10.0.0.2\n    connection: local\n")
    text = edit(text, "    address: 10.0.0.1\n",
                "    address: 10.0.0.1\n    ssh: {user: admin, port: 2222}\n")
    return load(edit(text, "cluster_name: test\n", "cluster_name: test\nssh:\n  user: admin\n"))


CLUSTERS = {**{name: lambda path=path: load_cluster(path) for name, path in SHIPPED_INVENTORIES.items()},
            "mixed": mixed_cluster}


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_ansible_sees_the_same_hosts_groups_and_variables(tmp_path, monkeypatch, name):
    monkeypatch.setenv("HOME", "/home/operator")
    cluster = CLUSTERS[name]()
    seen = ansible_sees(tmp_path, "rendered", render_ansible_inventory(cluster))
    assert seen == ansible_sees(tmp_path, "on-each-host", every_variable_on_its_host(cluster))
    assert sorted(seen["_meta"]["hostvars"]) == sorted(cluster.hosts)


def test_only_what_every_host_has_alike_is_shared():
    document = inventory_document(mixed_cluster())
    group = document["all"]["children"]["cluster"]
    # box is local (no ansible_user, ansible_port, ansible_become); head's port is its own
    assert group["vars"] == {"ansible_python_interpreter": "/usr/bin/python3"}
    assert group["hosts"]["head"]["ansible_port"] == 2222 and group["hosts"]["gpu1"]["ansible_port"] == 22
    shared = inventory_document(load(BASE))["all"]["children"]["cluster"]["vars"]
    assert shared == {
        "ansible_python_interpreter": "/usr/bin/python3", "ansible_user": "root", "ansible_port": 22,
    }
