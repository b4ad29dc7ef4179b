"""cluster.resolve: the problems of every concern are reported together, in line order."""

from __future__ import annotations

from unit_helpers import BASE, FILE, edit_all, line_of, problem, problems


def test_every_cross_check_problem_is_reported_together_in_line_order():
    text = edit_all(
        BASE,
        [
            ("  - name: box\n", "  - name: head\n  - name: box\n"),
            ("login: [head]", "login: [head, nowhere]"),
            ("addresses: 10.0.1.[1-4]", "addresses: 10.0.1.[1-3]"),
            ("    base_port: 17001\n", ""),
            ("nodes: [gpu, dev]", "nodes: [gpu, dev, ghost]"),
        ],
    )
    assert problems(text) == [
        f"{FILE}:{line_of(text, '  - name: box') - 1}: hosts[1].name: host 'head' is declared twice",
        problem(
            text, "login:", "login[1]", "host 'nowhere' is neither declared under hosts nor a compute node"
        ),
        problem(text, "addresses: 10.0.1.[1-3]", "node_groups[0].addresses", "3 addresses for 4 nodes"),
        problem(
            text,
            "  - name: dev",
            "node_groups[1].base_port",
            "single-host groups need base_port (one slurmd port per node)",
        ),
        problem(
            text,
            "nodes: [gpu, dev, ghost]",
            "partitions[0].nodes[2]",
            "'ghost' is neither a node group nor a node",
        ),
    ]
