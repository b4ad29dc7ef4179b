"""``cluster-cli gpu-kit``: the GPU proof in one directory (``pack``), made on a Debian machine for
a GPU machine with no network, no apt and maybe no Debian (docs/gpu-validation.md)."""
