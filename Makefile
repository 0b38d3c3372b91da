# Radar Pipeline. `make run` and `make test` are the two commands; each bootstraps .venv.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CLI defaults RADAR_VAULT, RADAR_DB and DAGSTER_HOME to data/ in this repository.
UI_HOME := $(if $(DAGSTER_HOME),$(DAGSTER_HOME),$(CURDIR)/data/dagster_home)
UI_PORT ?= 3000

.PHONY: run test test-fast test-slow test-postgres lint typecheck ui ui-paused screenshots schema bench faults soak clean-venv bytecode

# Recreated when missing or stale (the lock or pyproject changed since it was installed).
$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# The package's bytecode, as pip writes it for every package it installs (an editable install
# writes none). Python writes it on first import anyway, except where PYTHONDONTWRITEBYTECODE is
# set: then every process (each Dagster run, each `radar` command) compiled the package's
# 19,000 lines again, ~0.6 s of CPU. Only files changed since are compiled; a stale file is
# never read (Python compares it with its source).
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q radar_pipeline

# The closing lines count what happened, read from the collection's own summary line ("passed
# N, failed N, skipped N") and the open dead letters: a Source skipped now (in its backoff, or
# inside its minIntervalSeconds) after a failure is still failing, and is said so. A collection
# in which some Sources failed (exit 2: offline, the production Sources do) still ran: make
# succeeds; only a collection that could not run (exit 1) fails the target.
RUN_VAULT := $(if $(RADAR_VAULT),$(RADAR_VAULT),data/vault)
# The demo vault is tracked as data/vault-template/; data/vault/ is the working copy git ignores
# (the pipeline writes health keys into its Source files, the views, the Signals). It is made
# from the template when its Sources folder is missing; a file already there is never replaced,
# and a vault named by RADAR_VAULT is never touched.
TEMPLATE_VAULT := data/vault-template
DEMO_SOURCES := data/vault/Radar/Sources
OPEN_DEAD_LETTER_SOURCES := import json, sys; \
  print(len({d["sourceId"] for d in json.load(sys.stdin)["deadLetters"] if d["status"] == "open"}))
run: bytecode $(if $(RADAR_VAULT),,$(DEMO_SOURCES))
	@out=$$(mktemp); $(BIN)/radar collect --all | tee $$out; code=$${PIPESTATUS[0]}; echo; \
	counts=$$(sed -n 's/^collection as of .*passed \([0-9]*\), failed \([0-9]*\), skipped \([0-9]*\)$$/\1 \2 \3/p' $$out); \
	rm -f $$out; \
	if [ $$code -ne 0 ] && [ $$code -ne 2 ] || [ -z "$$counts" ]; then \
	  echo "The collection did not run: the radar line above says why and what to fix."; exit 1; \
	fi; \
	read passed failed skipped <<< "$$counts"; \
	failing=$$($(BIN)/radar dlq list --json | $(BIN)/python -c '$(OPEN_DEAD_LETTER_SOURCES)'); \
	if [ $$failed -eq 0 ] && [ $$skipped -eq 0 ]; then \
	  echo "Done: all $$passed Sources passed. The Signals are notes in $(RUN_VAULT)/Radar/Signals."; \
	else \
	  echo "Done: $$passed passed, $$failed failed, $$skipped skipped (not checked now: in their backoff"; \
	  echo "or inside minIntervalSeconds, each with its reason above). Still failing: $$failing Sources"; \
	  echo "(open dead letters: .venv/bin/radar dlq list). Offline, every production Source fails"; \
	  echo "with class network; the fixture Sources still yield their Signals. Failing Sources are"; \
	  echo "retried after their backoff: run make run again later."; \
	fi; \
	echo "Next: open $(RUN_VAULT) as a vault in Obsidian; Radar/Signals.base lists the new Signals to review,"; \
	echo "Radar/Sources.base the health of each Source. make ui shows the runs; add feeds with"; \
	echo ".venv/bin/radar sources import FILE.opml (they wait for legalAssessment: approved)."

# `cp -n` keeps any file a person put there; some cp versions exit 1 when they skip one, so the
# Sources folder itself is the test of success.
$(DEMO_SOURCES):
	@mkdir -p data/vault; cp -Rn $(TEMPLATE_VAULT)/. data/vault/ 2>/dev/null || true
	@test -d $@ || { echo "make: cannot copy $(TEMPLATE_VAULT) to data/vault" >&2; exit 1; }
	@echo "data/vault: the demo vault, copied from $(TEMPLATE_VAULT) (git ignores data/vault)."

lint: $(STAMP)
	$(BIN)/ruff format --check radar_pipeline radar_pipeline_tests $(wildcard benchmarks/*.py)
	$(BIN)/ruff check radar_pipeline radar_pipeline_tests $(wildcard benchmarks/*.py)

typecheck: $(STAMP)
	$(BIN)/mypy

# The tests run on pytest-xdist workers, one per core (TEST_WORKERS=1 runs them in one process);
# most of their time is spent waiting on Dagster processes and loopback servers, so two workers
# on two cores take about half the time of one. Each test has its own temp vault, store and
# DAGSTER_HOME, and takes its ports from the kernel.
TEST_WORKERS ?= auto
PYTEST := $(BIN)/pytest -q -n $(TEST_WORKERS) --dist worksteal

test-fast: bytecode
	$(PYTEST) -m "not slow"

test-slow: bytecode
	$(PYTEST) -m slow

test: lint typecheck bytecode
	$(PYTEST)

# The team profile: a private PostgreSQL server on 127.0.0.1 (installed from Debian's packages
# when missing), the Dagster instance on it, daemon-launched runs; the server is removed after.
test-postgres: bytecode
	TEST_WORKERS=$(TEST_WORKERS) bash radar_pipeline/deploy/test_postgres.sh

# `make ui`: `dagster dev` (webserver, daemon, code server) with every schedule and sensor
# RUNNING by default; `make ui-paused`: the same with each of them STOPPED (RADAR_AUTOMATION=
# stopped, read by the definitions: radar_pipeline/defs/automation.py), to start by hand under
# Automation. A state once set in the UI is kept by the instance either way.
# The home is prepared first, under the CLI's bootstrap lock: dagster.yaml copied into an empty
# one, a storage half-created by a kill completed (radar_pipeline/defs/instance.py). `dg dev`
# (Dagster 1.13's start; `dagster dev` is superseded by it) then runs from inside the home on
# workspace.yaml: from the repository's root Dagster would find the repository's dagster.yaml
# and warn that it "will not be used" (the home's copy is the one in use).
# `exec` makes dg dev the recipe's own process: Ctrl-C (SIGINT to the terminal's process
# group) reaches it directly and it stops the webserver, the daemon and the code servers.
# Started in the background by a script (`make ui &`, `setsid make ui &`), every process
# inherits SIGINT ignored (POSIX, job control off), and dg dev gives SIGTERM the handler
# SIGINT has: both would be ignored, and only SIGHUP would stop it. So dg dev is exec'd by a
# Python line that first puts SIGINT back to its default (a shell cannot: a signal ignored on
# entry stays ignored): SIGTERM to make's PID (make hands it to dg dev) or SIGINT to the
# group then stop it all (README, "Start here").
UI_EXEC := "$(abspath $(BIN))/python" -c 'import os, signal, sys;   signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])'

UI_ENV := DAGSTER_HOME="$(abspath $(UI_HOME))" \
  $(if $(RADAR_VAULT),RADAR_VAULT="$(abspath $(RADAR_VAULT))") \
  $(if $(RADAR_DB),RADAR_DB="$(abspath $(RADAR_DB))")
define start_ui
	@$(UI_ENV) $(BIN)/python -m radar_pipeline.defs.instance
	@echo "dg dev on http://127.0.0.1:$(UI_PORT), instance $(abspath $(UI_HOME)), schedules and sensors $(1)"
	cd "$(abspath $(UI_HOME))" && $(UI_ENV) RADAR_AUTOMATION=$(2) exec $(UI_EXEC) "$(abspath $(BIN))/dg" dev \
	  -w "$(CURDIR)/workspace.yaml" -h 127.0.0.1 -p $(UI_PORT)
endef

ui: bytecode $(if $(RADAR_VAULT),,$(DEMO_SOURCES))
	$(call start_ui,RUNNING by default,running)

ui-paused: bytecode $(if $(RADAR_VAULT),,$(DEMO_SOURCES))
	$(call start_ui,STOPPED by default,stopped)

# The UI's pages as a person sees them, PNGs in docs/screenshots/ (benchmarks/screenshots.py):
# a real dagster dev on a temp home, vault and loopback feeds, a collection and a backfill,
# then headless Chromium (Debian's `chromium`). SCREENSHOT_PORT=0 takes a port from the kernel.
SCREENSHOT_PORT ?= 0
screenshots: bytecode
	$(BIN)/python -m benchmarks.screenshots --port $(SCREENSHOT_PORT)

# The fault suite at full strength (50 kill trials, 10 overlap rounds, the whole corpus, long
# fuzzing, 12 trials of two team-profile workers with one killed); `make test` runs the same
# tests with a handful of trials. The two-worker case starts a throwaway PostgreSQL server
# (radar_pipeline_tests/pgserver.py) when the server binaries are installed, else it is skipped
# with that reason (`make test` starts none). Figures: data/faults.jsonl.
faults: bytecode
	@rm -f data/faults.jsonl
	RADAR_FAULTS_FULL=1 RADAR_FAULTS_FIGURES=$(CURDIR)/data/faults.jsonl \
		$(BIN)/pytest -q radar_pipeline_tests/faults

# The JSON Schema of every `radar ... --json` output (docs/schema/), generated from the contract
# models in radar_pipeline/core/contract/; test_contract_schema fails while a file is stale.
schema: bytecode
	$(BIN)/python -m radar_pipeline_tests.contract_schema

bench: bytecode
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)

# A simulated week of the real dagster-daemon on a long-lived code server against loopback feeds
# (about 26 minutes on a shared 2-core machine; not part of make test): outages, a 429, a 410, a
# daemon kill and a crash; asserts the accounting, the failed partitions and the weekly close;
# figures in benchmarks/results/soak.md.
# SOAK_ARGS="--days 2" for a shorter one.
soak: bytecode
	$(BIN)/python -m benchmarks.soak $(SOAK_ARGS)

clean-venv:
	rm -rf $(VENV)
