"""Resolution of an inventory into a Cluster: the expanded nodes and hosts, and the cross-checks
that need that view, one module per concern. ``cluster_cli.cluster.resolve`` runs them in order.
"""
