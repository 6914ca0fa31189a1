# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint install dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall when the project's dependencies change. The test tooling (./testing: the
# distribution ingestion-pipeline-testing, package ingest_testing) is installed beside the
# package, editable: a distribution of its own so that the package users install carries none
# of it, and no requirement of the package's metadata (a path of this checkout in a wheel's
# metadata would point nowhere on another machine).
#
# The installs go through uv (itself from the package index) when it installs: the same
# packages as pip resolves, in ~15 s instead of ~90 s of a fresh clone's `make test`; pip
# does them when uv cannot be had (`make install INSTALLER=pip` forces it).
INSTALLER ?= uv
$(STAMP): $(BIN)/python pyproject.toml testing/pyproject.toml
	@if [ "$(INSTALLER)" = uv ] && $(BIN)/python -m pip install --quiet uv; then \
	  set -x; \
	  $(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[test]' && \
	  $(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps -e ./testing; \
	else \
	  set -x; \
	  $(BIN)/python -m pip install --quiet -e '.[test]' && \
	  $(BIN)/python -m pip install --quiet --no-deps -e ./testing; \
	fi
	@touch $(STAMP)

install: $(STAMP)

# The whole loop on the embedded server: migrate, upload the samples, run the Dagster job
# ingest_documents in process, print the batch and a search.
demo: $(STAMP)
	$(BIN)/ingest demo

# Two pytest processes per core (at most 4): much of the suite waits on Dagster's daemon,
# subprocesses and lease deadlines with a core idle (on 2 cores, 3 processes: 521 s instead of
# 640 s; 4 processes: 566 s instead of 621 s for 3, issue 60's suite of 2,555 tests). Each has
# its own embedded server and its own databases on TEST_DATABASE_URL's; worksteal: an idle
# process takes tests queued on a busy one (the slow tail of a run). `make test PYTEST_XDIST=`
# runs the suite in one process.
PYTEST_WORKERS := $(shell $(PYTHON) -c 'import os; print(min(4, 2 * (os.cpu_count() or 1)))')
PYTEST_XDIST ?= -n $(PYTEST_WORKERS) --dist worksteal

# Lint first (seconds), then the suite: ruff (lint and format; pyproject.toml), import-linter
# (the layers), mypy (strict, over the package; pyproject.toml), squawk (migrations;
# .squawk.toml), no tracked file over 1 MB, and the size budgets (tools/check_budgets.py:
# README.md ≤ 10 KB, bench/README.md ≤ 25 KB, package modules and bench scripts ≤ 400 lines).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/squawk --config .squawk.toml migrations/2*.sql
	$(BIN)/python tools/check_file_sizes.py
	$(BIN)/python tools/check_budgets.py

# --durations=30: every run prints its slowest tests (issue 45: the suite's budget is 10 minutes).
PYTEST_ARGS ?= --durations=30

# The system tools some tests drive (Tesseract, pandoc, LibreOffice, Chromium, PgBouncer, groff,
# Ghostscript): installed when this run may (root with apt-get), else their tests are skipped
# and the run's last lines name them. Done once: the stamp is made when none is missing.
SYSTEM_TOOLS := $(VENV)/.system-tools
$(SYSTEM_TOOLS): tools/system-tools.sh | $(BIN)/python
	@status=0; bash tools/system-tools.sh || status=$$?; \
	if [ $$status = 0 ]; then touch $@; elif [ $$status != 3 ]; then exit $$status; fi

test: lint $(SYSTEM_TOOLS)
	$(BIN)/python -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

# The wheel and sdist to install outside a checkout (docs/integrations.md), in $(DIST): built by
# hatchling, of the test extra, in .venv (no network); tests/integration/test_installed_wheel.py
# installs the wheel in a fresh venv and indexes and searches from another folder.
DIST ?= dist
dist: $(STAMP)
	@[ -x $(BIN)/uv ] || $(BIN)/python -m pip install --quiet uv
	rm -f $(DIST)/ingestion_pipeline-*
	$(BIN)/uv build --quiet --no-build-isolation --python $(BIN)/python --out-dir $(DIST) .

clean:
	rm -rf $(VENV) build dist *.egg-info
