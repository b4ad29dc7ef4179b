"""``cluster-cli bundle``: what an air-gapped install of a cluster needs, in one directory."""
