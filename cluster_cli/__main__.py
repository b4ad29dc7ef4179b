"""`python -m cluster_cli` runs the CLI (no console-script shim needed)."""

from cluster_cli.cli import program

program()
