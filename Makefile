# The two commands of the README: `make demo` (build the CLI, run the demo) and `make test` (every
# test: Rust, then Python). `.ci/run` calls `make test`. Recipes run in bash with -euo pipefail, so
# any failing step fails the target.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

CARGO ?= cargo
PYTHON ?= python3
VENV := .venv
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# Extra options for the demo, e.g. `make demo DEMO_ARGS="--epochs 3 --step-ms 150"`.
DEMO_ARGS ?=
# What the Python tests need; nothing else goes into .venv (numpy is never assumed preinstalled).
PY_TEST_DEPS := "maturin>=1.16,<2" "pytest>=8" "pytest-timeout>=2.3" "numpy>=1.26"

.PHONY: demo test test-rust test-python bench bench-quick

demo:
	$(CARGO) build --release -p stokehold-cli
	$(TARGET_DIR)/release/stokehold demo $(DEMO_ARGS)

test: test-rust test-python

# The default workspace members: everything but the bindings crate, which needs libpython to link
# its tests and is exercised through pytest instead.
test-rust:
	$(CARGO) test

# The venv is rebuilt when this Makefile (and so the dependency list) changes.
$(VENV)/.deps: Makefile
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet $(PY_TEST_DEPS)
	touch $@

# Builds the package into .venv (release, as users get it), then runs pytest. While the Python
# package or its tests are not in the tree yet this step says so and skips; once python/tests
# exists, pytest must collect and pass tests (its exit code 5, "no tests collected", fails).
test-python: $(VENV)/.deps
ifeq ($(wildcard pyproject.toml),)
	@echo "test-python: no pyproject.toml yet: skipping the Python build and tests"
else
	VIRTUAL_ENV=$(abspath $(VENV)) PATH="$(abspath $(VENV))/bin:$$PATH" maturin develop --release
ifeq ($(wildcard python/tests),)
	@echo "test-python: no python/tests yet: skipping pytest"
else
	$(VENV)/bin/python -m pytest python/tests
endif
endif

# bench: side-by-side benchmarks (bench/README.md); never part of the test command.
bench:
	python3 bench/run.py
bench-quick:
	python3 bench/run.py --quick
