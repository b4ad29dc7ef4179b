#!/usr/bin/env bash
# Set up the control node: a virtual environment in .venv with cluster-cli, Ansible, the test
# tools and torch (the CPU wheel pip finds on these machines). Idempotent; ~3 min when fresh.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "cluster-cli needs Python >= 3.11 (found $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.cluster-cli-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test,training]'
  touch "$stamp"
fi
.venv/bin/python -m cluster_cli --version
