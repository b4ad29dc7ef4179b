"""The verbs of `cluster-cli`, one module per group of verbs; cli.py dispatches to them and turns
their errors into messages and exit codes. Each verb imports what it needs when it runs."""
