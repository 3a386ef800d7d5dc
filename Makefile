# Trainboard: `make run` starts the dashboard, `make test` runs the whole test suite.
PYTHON ?= python3
VENV_PY := .venv/bin/python
PYTEST_ARGS ?=
# pytest-xdist processes for `make test` (0: one process). Each starts its own live stack
# (conftest.py). Three fill a 2-core machine best (README, "Tests"). worksteal: each takes a
# contiguous share (a module's tests mostly together) and an idle one takes half of a busy
# one's rest, so none is left alone with the browser tests at the end.
PYTEST_WORKERS ?= 3
XDIST := $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist worksteal)
# Python keeps the bytecode of what it imports, in .venv and the clone, even where the
# environment says not to: cheaper than compiling all of site-packages at install, and far
# cheaper than each process compiling its imports again at every start (README, "Set-up").
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test setup lint format

setup:
	@$(PYTHON) scripts/setup_env.py
	@[ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund

run: setup
	@$(VENV_PY) scripts/run.py

test: setup
	$(VENV_PY) -m pytest $(XDIST) $(PYTEST_ARGS)

lint:
	.venv/bin/lint-imports
	$(VENV_PY) -m ruff check .
	$(VENV_PY) -m ruff format --check .

format:
	$(VENV_PY) -m ruff format .
