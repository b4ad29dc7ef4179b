# The two commands of the README:
#   make cluster   deploy the default single-host cluster and run its smoke jobs
#   make test      run the whole test suite (what CI runs)
PY := .venv/bin/python
INVENTORY ?= inventories/local/inventory.yaml

.PHONY: setup cluster test unit lint teardown

setup:
	bash scripts/setup.sh

cluster: setup
	$(PY) -m cluster_cli deploy $(INVENTORY)
	$(PY) -m cluster_cli status $(INVENTORY)
	$(PY) -m cluster_cli smoke $(INVENTORY) --json smoke-report.json --junit smoke-report.xml --html smoke-report.html

test: setup
	bash scripts/test.sh

unit: setup
	$(PY) -m pytest tests/unit -q

lint: setup
	.venv/bin/yamllint -s .
	.venv/bin/ansible-lint --profile production
	.venv/bin/ruff check .
	.venv/bin/mypy

teardown: setup
	$(PY) -m cluster_cli teardown $(INVENTORY)
