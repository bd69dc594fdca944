# The README's commands. Everything installs from the package index into ./.venv;
# uv itself is bootstrapped into ./.tools so a fresh machine needs only Python 3.11+.
PYTHON ?= python3
UV := .tools/bin/uv
VENV := .venv
RUN := $(UV) run --frozen --no-sync

.PHONY: run test test-faults bench install lint clean schema

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check "uv>=0.5"

$(VENV)/.installed: $(UV) uv.lock pyproject.toml libs/*/pyproject.toml services/*/pyproject.toml
	$(UV) sync --frozen --all-packages --python $(PYTHON)
	touch $@

install: $(VENV)/.installed

run: install
	$(RUN) seedline up

# pytest exits 5 when it collected no tests: that is a failure, not a pass.
test: install
	$(RUN) pytest -q -p no:cacheprovider; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests were collected" >&2; exit 1; fi; exit $$rc

test-faults: install
	$(RUN) pytest -q -p no:cacheprovider -m slow

bench: install
	$(UV) sync --frozen --all-packages --extra bench --python $(PYTHON)
	$(RUN) seedline bench

schema: install
	$(RUN) seedline docs --out docs

clean:
	rm -rf .venv .tools .seedline
