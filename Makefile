# Two commands set everything up on a fresh machine: `make run` and `make test`.
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test install install-dev uv-available sandbox-tools lint typecheck bench clean

# uv manages the virtualenv; install it with pip when the machine has none.
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif

uv-available:
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv

# User code runs under bubblewrap, with slirp4netns for functions allowed to reach the network
# (docs/sandbox.md): install the Debian packages when missing.
sandbox-tools:
	@{ command -v bwrap && command -v slirp4netns; } >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q bubblewrap slirp4netns >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && \
	    $$SUDO apt-get install -y -q bubblewrap slirp4netns >/dev/null; } || \
	  { echo "Could not install bubblewrap and slirp4netns (Debian/Ubuntu: apt-get install" \
	         "bubblewrap slirp4netns), or set DHUB_SANDBOX=unsafe to run user code without" \
	         "isolation." >&2; exit 1; }; }

install: uv-available sandbox-tools
	$(UV) sync --frozen --inexact --no-dev  # --inexact: keep the dev tools `make test` installed

install-dev: uv-available sandbox-tools
	$(UV) sync --frozen --group dev

run: install
	$(BIN)/dhub serve --host $(HOST) --port $(PORT) --examples examples

lint: install-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: install-dev
	$(BIN)/mypy

test: install-dev lint typecheck
	$(BIN)/pytest -q

bench: uv-available
	$(UV) sync --frozen --group dev --group bench
	$(BIN)/python bench/api_latency.py
	$(BIN)/python bench/access_list.py
	$(BIN)/python bench/engine_overhead.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/runs.py
	$(BIN)/python bench/providers.py
	$(BIN)/python bench/react.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
