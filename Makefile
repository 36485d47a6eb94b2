# The two commands: `make dev` and `make test`. Both install what they need on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
JS_DIR := tests/js

.PHONY: dev test install install-test js-deps bench clean

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

$(JS_DIR)/node_modules/.installed: $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test
js-deps: $(JS_DIR)/node_modules/.installed

dev: install
	$(PY) -m app dev

test: install-test js-deps
	$(PY) -m pytest $(PYTEST_ARGS)

bench: install
	@for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) $(JS_DIR)/node_modules
