# DeLLM: `make run` serves the app, `make test` runs the whole suite.
# Both set everything up from scratch on a fresh machine (Python 3.11, npm, apt).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HOST ?= 127.0.0.1
export PORT HOST

# Settings from .env (see .env.example), if present.
ifneq (,$(wildcard .env))
include .env
export
endif

.PHONY: run test test-one test-stop setup lint stop bench eval

# Development set-up: the runtime (requirements.txt) plus tests, lint, types,
# bench and eval (requirements-dev.txt). Production installs requirements.txt only.
$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

setup: $(VENV)/.installed

# Browser modules (Cytoscape.js, cytoscape-dagre) exactly as the lock file pins them.
frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	cd frontend && npm ci --no-audit --no-fund
	touch $@

# Debian's Chromium drives the browser tests (Playwright's own download does not work here).
/usr/bin/chromium:
	$$([ "$$(id -u)" = 0 ] || echo sudo) apt-get update
	$$([ "$$(id -u)" = 0 ] || echo sudo) apt-get install -y chromium

# `make run` is development: it asks for DEBUG (every page shows a banner) and
# the demo user. Production leaves DJANGO_DEBUG unset (.env.example, "Production").
run: export DJANGO_DEBUG ?= true
run: setup frontend/node_modules/.installed
	$(PY) -m dellm_site.embedded start
	$(PY) manage.py migrate --noinput
	$(PY) manage.py dellm_demo_user
	@echo "DeLLM on http://$(HOST):$(PORT)/ in development mode (user demo / password demo); Ctrl-C stops web, worker and beat."
	$(VENV)/bin/honcho start -f Procfile

stop: setup
	$(PY) -m dellm_site.embedded stop

# mypy and import-linter import the settings: point them at URLs so that no
# embedded server starts (nothing connects while they run).
LINT_ENV := DATABASE_URL=postgresql://lint@127.0.0.1:1/lint REDIS_URL=redis://127.0.0.1:1/0

lint: setup frontend/node_modules/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	cd frontend && ./node_modules/.bin/eslint static/js
	$(LINT_ENV) $(VENV)/bin/lint-imports
	$(LINT_ENV) $(VENV)/bin/mypy

# The suite runs against its own throwaway embedded PostgreSQL, removed afterwards,
# in TEST_PROCESSES processes (a test module's tests stay in one): most tests
# wait on a worker, a browser or the database, so two share two cores well.
# `makemigrations` starts the embedded servers first, for every process to find.
TEST_PROCESSES ?= 2
test: export DELLM_LAB = 1
test: setup lint frontend/node_modules/.installed /usr/bin/chromium
	@set -e; \
	export DELLM_DATA_DIR=$$(mktemp -d /tmp/dellm-test.XXXXXX); \
	trap '$(PY) -m dellm_site.embedded stop >/dev/null; rm -rf "$$DELLM_DATA_DIR"' EXIT; \
	$(PY) manage.py makemigrations --check --dry-run; \
	$(VENV)/bin/pytest --numprocesses=$(TEST_PROCESSES) --dist=loadfile

# One test (or file, or folder) against a database kept between runs:
# `make test-one T=tests/chat/turns/test_turn_run.py::test_name`. The embedded
# PostgreSQL under .dellm-test/ stays up and pytest-django reuses its test
# database; after a new migration add ARGS=--create-db. `make test-stop` ends it.
TEST_ONE_DATA := $(CURDIR)/.dellm-test
test-one: export DELLM_LAB = 1
test-one: export DELLM_DATA_DIR = $(TEST_ONE_DATA)
test-one: setup
	$(VENV)/bin/pytest --reuse-db -q $(ARGS) $(T)

test-stop: export DELLM_DATA_DIR = $(TEST_ONE_DATA)
test-stop: setup
	$(PY) -m dellm_site.embedded stop

# The paper's utility and deletion experiments, offline by default (about 25 min on 2 cores);
# report.md, thresholds.png and results.json land in eval-results/.
eval: export DELLM_LAB = 1
eval: setup
	$(PY) -m dellm_site.embedded start
	$(PY) manage.py migrate --noinput
	$(PY) manage.py dellm_eval --out eval-results
	$(PY) manage.py dellm_forget_eval --out eval-results

# Benchmarks at scale in a throwaway embedded PostgreSQL (about 20 min on 2 cores at
# BENCH_SCALE=full: 1M messages over 100 users plus users of 1k, 2k and 100k messages;
# BENCH_SCALE=small: 200k messages, random vectors, a few minutes), plus the soak's
# 10 minutes of the `make run` stack under 50 users (`dellm_bench --soak-seconds`, lab/HISTORY.md).
# REPORT.md, README_SECTION.md, results.json and the charts land in bench-results/.
BENCH_SCALE ?= full
bench: export DELLM_LAB = 1
bench: setup frontend/node_modules/.installed /usr/bin/chromium
	@set -e; \
	export DELLM_DEPENDENTS_RATE=1000000/min DELLM_GRAPH_RATE=1000000/min DELLM_DELETION_PREVIEW_RATE=1000000/min DELLM_THREAD_RATE=1000000/min; \
	export DELLM_DATA_DIR=$$(mktemp -d /tmp/dellm-bench.XXXXXX); \
	trap '$(PY) -m dellm_site.embedded stop >/dev/null; rm -rf "$$DELLM_DATA_DIR"' EXIT; \
	$(PY) manage.py migrate --noinput >/dev/null; \
	if [ "$(BENCH_SCALE)" = small ]; then \
	  seed="--users 10 --messages 100000 --extra-users 1000,2000,100000 --random-vectors"; \
	else \
	  seed="--users 100 --messages 1000000 --extra-users 1000,2000,100000"; \
	fi; \
	$(PY) manage.py dellm_seed $$seed; \
	$(PY) manage.py dellm_bench --out bench-results \
	  --command-line "make bench BENCH_SCALE=$(BENCH_SCALE) (manage.py dellm_seed $$seed; manage.py dellm_bench)"
