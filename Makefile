# Every target creates .venv and installs what it needs, so a fresh clone needs only Python and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow test-lowest lint fuzz bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m pooler.demo

lint: $(STAMP)
	$(BIN)/ruff check pooler tests bench
	$(BIN)/mypy

test: lint
	@$(BIN)/python tests/pg_server.py
	$(BIN)/pytest -q

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

# The suite against the lowest versions pyproject.toml allows (.ci/lowest.txt), in its own venv.
LOWEST := .venv-lowest
test-lowest:
	$(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install --quiet --upgrade pip
	$(LOWEST)/bin/python -m pip install --quiet -c .ci/lowest.txt -e '.[dev]'
	$(LOWEST)/bin/pytest -q

fuzz: $(STAMP)
	POOLER_FUZZ_EXAMPLES=20000 $(BIN)/pytest -q tests/test_fuzz.py tests/test_check_run_agree.py tests/test_schema_rules.py

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) $(LOWEST) .pytest_cache .mypy_cache .ruff_cache
