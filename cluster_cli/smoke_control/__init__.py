"""The control node's side of the smoke suite.

``target`` turns the inventory into a ``SmokeTarget``; ``remote`` runs the stdlib-only
``cluster_cli.smoke`` package on a submit host over SSH (its entry point there is
``cluster_cli.smoke.on_submit_host``). This side may use anything cluster-cli depends on; the host side
may not.
"""
