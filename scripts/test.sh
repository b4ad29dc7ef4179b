#!/usr/bin/env bash
# The project's whole test suite, as CI runs it: lint (YAML, Ansible, Python), then pytest (unit
# tests, real Slurm daemons, a real deploy of the local cluster, its smoke jobs). Tests that need
# something this machine lacks (root, a GPU) skip with a reason; pytest's "no tests ran" (exit 5)
# fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

# System tools the tests use: Slurm daemons for the rendered-config test, and debootstrap,
# systemd-nspawn, dpkg-scanpackages and nc for the multi-host test bed, patchelf and readelf for
# the GPU kit (cluster-cli gpu-kit), Chromium for the smoke HTML report's browser test
# (tests/smoke/test_smoke_html.py, about 120 MB to fetch once). The deploy test installs
# the rest (MariaDB, slurmdbd, ...) through the roles, as a user's deploy would.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -qq "$@"; }
  apt_get update
  apt_get install -y --no-install-recommends slurmctld slurmd slurm-client munge patchelf binutils \
    systemd-container debootstrap dpkg-dev netcat-openbsd gcc make chromium >/dev/null
fi
# Slurm's own gpu_nvml.so for Debian's slurmd, built alone (about 20 s, cached per version), which
# tests/nvml runs against the NVML emulator. Without it those tests skip, saying why.
if [ "$(id -u)" = 0 ] && command -v slurmd >/dev/null; then
  bash scripts/build-nvml-plugin.sh || echo "scripts/build-nvml-plugin.sh failed: tests/nvml's slurmd tests will skip" >&2
fi
yamllint --strict .
ansible-lint --profile production
# Python: ruff's rules and mypy's types, over the paths pyproject.toml names.
ruff check .
mypy
python -m pytest "$@"
