"""Helpers for the benchmark and mutation scripts and the tests: not shipped with cluster-cli
(the wheel carries cluster_cli/ only). Scripts put the repository root on sys.path to import them."""
