"""cluster-cli: provision a Slurm GPU cluster and its training stack from one typed inventory."""

__version__ = "0.1.0"
