"""Prometheus exporters that run on the cluster's hosts (issue 37): standard library plus the
binding each one names, so that they run in any Python 3.10 or newer."""
