"""resolve/hosts.py: declared hosts, the roles each host runs, and the hosts the roles name."""

from __future__ import annotations

import pytest
from unit_helpers import BASE, FILE, edit, expected_problems, line_of, load, problems

NOT_A_HOST = "host 'nowhere' is neither declared under hosts nor a compute node"


def test_host_declared_twice():
    text = edit(BASE, "  - name: box\n", "  - name: head\n  - name: box\n")
    # the second entry, on the line after the first one's address
    assert problems(text) == [
        f"{FILE}:{line_of(text, 'address: 10.0.0.1') + 1}: hosts[1].name: host 'head' is declared twice"
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            "  - name: box\n",
            "  - name: spare\n  - name: box\n",
            [
                (
                    "name: spare",
                    "hosts[1].name",
                    "host 'spare' has no role (controller, database, login, monitoring, nodes)",
                )
            ],
            id="host_without_a_role",
        ),
        pytest.param(
            "  primary: head",
            "  primary: nowhere",
            [("nowhere", "controllers.primary", NOT_A_HOST)],
            id="primary_controller_on_an_unknown_host",
        ),
        pytest.param(
            "  host: head\nlogin",
            "  host: nowhere\nlogin",
            [("nowhere", "accounting.host", NOT_A_HOST)],
            id="database_on_an_unknown_host",
        ),
        pytest.param(
            "login: [head]",
            "login: [head, nowhere]",
            [("nowhere", "login[1]", NOT_A_HOST)],
            id="login_on_an_unknown_host",
        ),
        pytest.param(
            "  primary: head\n",
            "  primary: head\n  backup: nowhere\n",
            [("backup: nowhere", "controllers.backup", NOT_A_HOST)],
            id="backup_controller_on_an_unknown_host",
        ),
        pytest.param(
            "  primary: head\n",
            "  primary: head\n  backup: head\n",
            [("backup: head", "controllers.backup", "the backup controller must differ from the primary")],
            id="backup_controller_same_as_primary",
        ),
        pytest.param(
            "accounting:\n  host: head\n",
            "accounting:\n  enabled: true\n",
            [("accounting:", "accounting.host", "accounting is enabled: name the database host")],
            id="accounting_needs_a_host",
        ),
        pytest.param(
            "login: [head]",
            "login: [head, head]",
            [("login:", "login[1]", "login host 'head' is listed twice")],
            id="login_listed_twice",
        ),
    ],
)
def test_host_and_role_problems(old, new, expected):
    text = edit(BASE, old, new)
    assert problems(text) == expected_problems(text, expected)


def test_a_compute_node_may_be_the_controller():
    text = edit(BASE, "  primary: head", "  primary: gpu1")
    cluster = load(text)
    assert {"controller", "compute"} <= cluster.hosts["gpu1"].roles


def test_accounting_off_needs_no_host():
    text = edit(BASE, "accounting:\n  host: head\n", "accounting:\n  enabled: false\n")
    assert "database" not in load(text).hosts["head"].roles
