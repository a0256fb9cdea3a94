# Every target creates .venv and installs what it needs, so a fresh clone needs only Python and make.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow lint fuzz bench clean

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
	$(BIN)/pytest -q

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

fuzz: $(STAMP)
	POOLER_FUZZ_EXAMPLES=20000 $(BIN)/pytest -q tests/test_fuzz.py tests/test_check_run_agree.py tests/test_schema_rules.py

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
