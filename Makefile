# Every target creates .venv and installs what it needs, so a fresh clone needs only Python and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# pytest keeps the test modules it has rewritten for its assertions as bytecode; without that
# cache every test worker rewrites every module again (seconds of CPU each run).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo docs venv test test-fast test-slow test-lowest test-python venv-lowest venv-python lint fuzz bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The venv alone: CI makes it before the runs that share it start side by side.
venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m pooler.demo

# docs/cli.md is written from the argparse parsers; tests/test_docs.py fails when it is stale.
docs: $(STAMP)
	$(BIN)/python -m pooler.cli.reference

lint: $(STAMP)
	$(BIN)/ruff check pooler tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# Two test workers a core (pytest-xdist): the tests wait on sockets and processes more than they
# compute. Each worker starts its own PostgreSQL when its tests need one.
WORKERS ?= $(shell $(PYTHON) -c 'import os; print(2 * (os.cpu_count() or 1))')

test: lint
	@$(BIN)/python tests/pg_server.py
	@$(BIN)/python tests/junit_schema.py
	$(BIN)/pytest -q -n $(WORKERS)

# The loop while working: no pooler or store processes, no PostgreSQL, no browser.
test-fast: $(STAMP)
	$(BIN)/pytest -q -n $(WORKERS) -m 'not slow and not process and not postgres and not browser'

# The long load tests and the peak-memory measurements (CI runs them beside the other runs), two at
# a time: each waits on its processes and the store, and measures its own process's memory.
test-slow: $(STAMP)
	$(BIN)/pytest -q -n 2 -m slow

# The parts that lean on a dependency's API (the client on urllib3, the MCP server on mcp, the
# report on jinja2, the shared journal on psycopg, checks on jsonschema, traces on the OpenTelemetry
# SDK, the metrics tests on prometheus_client's parser) against the lowest versions
# pyproject.toml allows (.ci/lowest.txt), in a venv of their own.
LOWEST := .venv-lowest
LOWEST_TESTS := tests/test_client.py tests/test_client_env.py tests/test_client_wire.py tests/test_mcp.py \
	tests/test_mcp_http.py tests/test_cli_check.py tests/test_report_files.py tests/test_pg_work.py tests/test_schema_rules.py \
	tests/test_traces.py tests/test_mcp_observe.py tests/test_metrics_file.py
LOWEST_PYTHON ?= $(PYTHON)
# The venv alone (`make venv-lowest`), made once: CI makes it while `make test` runs.
$(LOWEST)/.installed: pyproject.toml .ci/lowest.txt
	$(LOWEST_PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install --quiet --upgrade pip
	$(LOWEST)/bin/python -m pip install --quiet -c .ci/lowest.txt -e '.[dev]'
	touch $@

venv-lowest: $(LOWEST)/.installed

# Two workers: its MCP and journal tests wait on servers more than they compute.
test-lowest: $(LOWEST)/.installed
	$(LOWEST)/bin/pytest -q -n 2 $(LOWEST_TESTS)

# The suite on another CPython pooler claims, in a venv of its own beside .venv: every test that needs
# no service (PostgreSQL, a browser), e.g. `make test-python PY=python3.10`; MARKS narrows it further.
PY ?= python3.10
PYVENV = .venv-$(notdir $(PY))
MARKS ?= not slow and not postgres and not browser
# The venv alone (`make venv-python PY=python3.10`), made once: CI makes it while `make test` runs.
$(PYVENV)/.installed: pyproject.toml
	$(PY) -m venv $(PYVENV)
	$(PYVENV)/bin/python -m pip install --quiet --upgrade pip
	$(PYVENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $@

venv-python: $(PYVENV)/.installed

test-python: $(PYVENV)/.installed
	$(PYVENV)/bin/python --version
	$(PYVENV)/bin/pytest -q -n $(WORKERS) -m '$(MARKS)'

fuzz: $(STAMP)
	POOLER_FUZZ_EXAMPLES=20000 $(BIN)/pytest -q tests/test_fuzz.py tests/test_check_run_agree.py tests/test_schema_rules.py

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(LOWEST) .venv-python3.* .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
