#!/usr/bin/env bash
# The project's whole test suite, as CI runs it: lint, then pytest (unit tests, real Slurm
# daemons, a real deploy of the local cluster, its smoke jobs). Tests that need something this
# machine lacks (root, a GPU) skip with a reason; pytest's "no tests ran" (exit 5) fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
yamllint --strict .
ansible-lint --profile production
python -m pytest "$@"
