# The README's commands. Everything installs from the package index into ./.venv;
# uv itself is bootstrapped into ./.tools so a fresh machine needs only Python 3.11+.
PYTHON ?= python3
UV := .tools/bin/uv
VENV := .venv
RUN := $(UV) run --frozen --no-sync

# `make test` and `make check` run their tests in this many processes (pytest-xdist), each
# test with servers of its own: most of a server test's time is spent waiting (timers,
# fsyncs, processes starting), so two share two cores well. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2

# The fast inner loop: unit tests (no servers: not marked servers or slow), the contract tests
# of every port over its fake, and lint with ruff when it is installed. `make test` runs all.
# tests/engines drives the real Claude Code and Codex CLIs (about 9 s a test), and the ACP
# engine's tests start an agent process or three each (about 2 s a test): make test only.
CHECK_ARGS := -m "not servers and not slow" --ignore=tests/engines -n $(TEST_WORKERS) --durations=15

# Tests keep their servers' data in a tmpfs folder where the machine has one: every test
# starts a nats-server and a database of its own, and on disk the fsyncs of that setup alone
# cost about 0.6 s a test. Servers and durability settings are the same (sync_interval: always,
# fsync on); only the medium under them differs (README: Tests).
TEST_TMPDIR := $(shell d=/dev/shm/seedline-tests; mkdir -p $$d 2>/dev/null && [ -w $$d ] && echo $$d)
TEST_ENV := $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR))

.PHONY: run check test test-faults test-cluster test-containers bench install lint clean schema engines chromium nftables dist

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check "uv>=0.5"

$(VENV)/.installed: $(UV) uv.lock pyproject.toml libs/*/pyproject.toml services/*/pyproject.toml
	$(UV) sync --frozen --all-packages --python $(PYTHON)
	touch $@

install: $(VENV)/.installed

# Versioned wheels of every package in ./dist. A runner machine installs seedline-cli from
# them alone: uv tool install --find-links dist seedline-cli (README: Runner machines).
dist: $(UV)
	rm -rf dist
	$(UV) build --all-packages --wheel --out-dir dist

# Ports: `make run NATS_PORT=5222 MONITOR_PORT=9222 WEB_PORT=9080` (defaults 4222, 8222,
# 8080), and any other option of `seedline up` with ARGS, e.g. ARGS="--no-runner".
NATS_PORT ?=
MONITOR_PORT ?=
WEB_PORT ?=
ARGS ?=
UP_ARGS = $(if $(NATS_PORT),--nats-port $(NATS_PORT)) $(if $(MONITOR_PORT),--monitor-port \
	$(MONITOR_PORT)) $(if $(WEB_PORT),--web-port $(WEB_PORT)) $(ARGS)

run: install
	$(RUN) seedline up $(strip $(UP_ARGS))

# The real engine CLIs that tests/engines drives, pinned, installed with npm into
# ./.tools/engines (README: Engines). Without npm those tests are skipped, and say so.
CLAUDE_CODE_VERSION := 2.1.332
CODEX_VERSION := 0.171.0
# The ACP adapters of Claude Code and Codex (engines acp:claude, acp:codex in tests/engines).
CLAUDE_AGENT_ACP_VERSION := 0.23.1
CODEX_ACP_VERSION := 0.16.0
ENGINES_DIR := .tools/engines
ENGINES_STAMP := $(ENGINES_DIR)/.installed-claude-$(CLAUDE_CODE_VERSION)-codex-$(CODEX_VERSION)-acp-$(CLAUDE_AGENT_ACP_VERSION)-$(CODEX_ACP_VERSION)

engines:
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: the tests of the real engine CLIs will be skipped"; \
	elif [ ! -f $(ENGINES_STAMP) ]; then $(MAKE) --no-print-directory $(ENGINES_STAMP); fi

$(ENGINES_STAMP):
	mkdir -p $(ENGINES_DIR)
	npm install --prefix $(ENGINES_DIR) --no-audit --no-fund --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION) \
		@zed-industries/claude-agent-acp@$(CLAUDE_AGENT_ACP_VERSION) \
		@zed-industries/codex-acp@$(CODEX_ACP_VERSION)
	$(ENGINES_DIR)/node_modules/.bin/claude --version
	$(ENGINES_DIR)/node_modules/.bin/codex --version
	rm -f $(ENGINES_DIR)/.installed-*
	touch $@

# Debian's chromium for the console's browser test (tests/web), installed with apt-get when
# this runs as root; otherwise that test is skipped, and says why.
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian's chromium for the console's browser test"; \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				chromium >/dev/null; } || echo "chromium did not install: the browser test will be skipped"; \
		else echo "chromium is missing and needs root with apt-get: the browser test will be skipped"; fi; \
	fi

# Debian's nftables drops a share of packets on a lossy link where the kernel has no netem
# (tests/hosts/network.py); installed with apt-get when this runs as root, otherwise such
# links are only slowed, and each run says which it used.
nftables:
	@if ! command -v nft >/dev/null 2>&1 && [ ! -x /usr/sbin/nft ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
				nftables >/dev/null; } || echo "nftables did not install: lossy links are only slowed"; \
		else echo "nft is missing and needs root with apt-get: lossy links are only slowed"; fi; \
	fi

check: install
	@started=$$(date +%s); \
	$(TEST_ENV) $(RUN) pytest -q -p no:cacheprovider $(CHECK_ARGS); rc=$$?; \
	if [ -x $(VENV)/bin/ruff ] || command -v ruff >/dev/null 2>&1; then \
		ruff=$$( [ -x $(VENV)/bin/ruff ] && echo $(VENV)/bin/ruff || echo ruff ); \
		$$ruff check libs services tests bench || rc=1; \
	else echo "ruff is not installed: lint skipped (pip install ruff, or uv tool install ruff)"; fi; \
	echo "make check took $$(( $$(date +%s) - started )) s"; exit $$rc

# pytest exits 5 when it collected no tests: that is a failure, not a pass.
test: install engines chromium
	@started=$$(date +%s); \
	$(TEST_ENV) $(RUN) pytest -q -p no:cacheprovider -m "not exhaustive" -n $(TEST_WORKERS) --durations=20; rc=$$?; \
	echo "make test took $$(( $$(date +%s) - started )) s"; \
	if [ $$rc -eq 5 ]; then echo "no tests were collected" >&2; exit 1; fi; exit $$rc

# The slow tests; the model-based test draws a fresh seed (printed; SEEDLINE_MODEL_SEED=<seed>
# replays it) and runs two copies of every service with pauses (SEEDLINE_MODEL_COPIES=1 or
# SEEDLINE_MODEL_PAUSES=0 to leave them out).
test-faults: install
	$(TEST_ENV) SEEDLINE_MODEL_COPIES=$${SEEDLINE_MODEL_COPIES:-2} \
		SEEDLINE_MODEL_PAUSES=$${SEEDLINE_MODEL_PAUSES:-1} \
		$(RUN) pytest -q -p no:cacheprovider -m "slow or exhaustive"

# The fault harness (tests/hosts, README: Faults across hosts): HOSTS_RUNS runs of
# HOSTS_SECONDS on fresh seeds, each fault kind in turn, then the table RELIABILITY.md keeps;
# SEEDLINE_HOSTS_SEED=<seed> replays one run. Needs root and `ip` (says so and skips without).
HOSTS_RUNS ?= 20
HOSTS_SECONDS ?= 60
test-cluster: install nftables
	$(TEST_ENV) $(RUN) python tests/hosts/campaign.py --seconds $(HOSTS_SECONDS) \
		$(if $(SEEDLINE_HOSTS_SEED),--seed $(SEEDLINE_HOSTS_SEED),--runs $(HOSTS_RUNS))

# docker-compose.yml run for real on podman (needs root and Debian's packages): builds the
# images, starts the stack gated by its health checks, drives it from the host, kills and
# restarts the timeline-writer, tears it all down (deploy/containers/test.sh; README: Docker).
test-containers: install
	bash deploy/containers/test.sh

bench: install engines
	$(UV) sync --frozen --all-packages --extra bench --python $(PYTHON)
	$(RUN) seedline bench

# The documents and source files generated from the code: docs/ (the contract, flows.md,
# the OpenAPI document), the NATS configurations and the client's directory.
schema: install
	$(RUN) seedline docs --out docs
	$(RUN) python -m seedline_devtools.generated

clean:
	rm -rf .venv .tools .seedline dist
