# Two entry points for a fresh machine: `make serve` and `make test` (both set up first).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PLUGINS := $(wildcard plugins/*/pyproject.toml)

.PHONY: setup serve test lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(PLUGINS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]' $(foreach p,$(PLUGINS),-e $(dir $(p)))
	touch $@

# mcphost-jwt, installed by setup, refuses every HTTP request until [plugins.jwt] is configured; the
# development server runs without it (`make serve SERVE_FLAGS=` keeps it).
SERVE_FLAGS ?= --disable-plugin jwt

serve: setup
	$(VENV)/bin/mcphost $(SERVE_FLAGS) serve

test: setup
	scripts/ensure-tools
	$(PY) -m pytest -q tests $(foreach p,$(PLUGINS),$(dir $(p))tests)

lint: setup
	$(VENV)/bin/ruff check mcphost plugins tests examples benchmarks
