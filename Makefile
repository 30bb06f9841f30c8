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
# What the Python tests and checks need; nothing else goes into .venv (numpy is never assumed
# preinstalled). jax and keras (run on the jax backend) are here so that their adapters are
# tested; the benchmark peers (tensorflow, torch, grain, ...) never are. ray[data] (with pyarrow)
# is here so that stokehold.ray runs its tests on a real local Ray cluster; moto's S3 server so
# that object storage is tested against a real server on loopback (Rust and Python tests start it);
# prometheus-client's parser reads the stats endpoint's OpenMetrics text (test_monitor.py).
PY_TEST_DEPS := "maturin>=1.16,<2" "pytest>=8" "pytest-timeout>=2.3" "numpy>=1.26" \
	"mypy>=1.18" "ruff>=0.14" "jax>=0.4.30" "keras>=3.5" "ray[data]==2.60.0" "moto[server]>=5.1" \
	"prometheus-client>=0.20"

.PHONY: demo test test-rust test-python check check-cycles check-rust check-python wheel check-wheel bench bench-quick oracle

# The demo's command is built without the audio, image and object-store features (it uses none
# of them; they are most of a cold build): `cargo build --release -p stokehold-cli` builds the
# full command, as the wheel's `stokehold` is.
demo:
	$(CARGO) build --release -p stokehold-cli --no-default-features
	$(TARGET_DIR)/release/stokehold demo $(DEMO_ARGS)

test: test-rust test-python

# The default workspace members: everything but the bindings crate, which needs libpython to link
# its tests and is exercised through pytest instead. The CLI turns on stokehold-io's `remote`
# feature, so the object-store tests run too, against the .venv's moto_server.
test-rust: $(VENV)/.deps
	STOKEHOLD_MOTO=$(abspath $(VENV))/bin/moto_server $(CARGO) test

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

# check: the static checks `.ci/run` adds to the tests (after `make test`, which built the package
# into .venv). Rust: formatting, clippy with warnings as errors (its incompatible_msrv lint holds
# the code to the declared rust-version). Python: ruff; mypy --strict on the package; stubtest of
# the native extension against _native.pyi; mypy --strict on the code blocks of the README and
# docs/GUIDE.md (extracted by python/tests/doc_blocks.py), so the guide type-checks as users write it.
# Both: no import cycle between the files of one crate or the modules of the package (check-cycles).
check: check-cycles check-rust check-python

# tools/check_cycles.py reads the `use` / `import` lines (standard library only, nothing to build)
# and fails on a cycle. A crate in CYCLES_PENDING is not untangled yet: its cycles are printed, not
# failed. Empty: every crate and the Python package are free of cycles (issue 47).
CYCLES_PENDING :=
check-cycles:
	$(PYTHON) tools/check_cycles.py $(addprefix --pending ,$(CYCLES_PENDING))

check-rust:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

DOC_BLOCKS := $(TARGET_DIR)/doc-blocks
check-python: $(VENV)/.deps
	$(VENV)/bin/ruff check python tools
	cd python && ../$(VENV)/bin/python -m mypy --config-file ../pyproject.toml stokehold
	$(VENV)/bin/python -m mypy --config-file pyproject.toml tools
	cd python && ../$(VENV)/bin/python -m mypy.stubtest --mypy-config-file ../pyproject.toml stokehold._native
	rm -rf $(DOC_BLOCKS)
	$(VENV)/bin/python python/tests/doc_blocks.py $(DOC_BLOCKS)
	$(VENV)/bin/python -m mypy --config-file pyproject.toml $(DOC_BLOCKS)

# wheel: the release wheel, manylinux_2_28 (glibc >= 2.28) through zig (PyPI's ziglang) so it
# installs on older distributions than this machine's glibc 2.36; into dist/.
# check-wheel: installs that wheel into a fresh venv and runs a pipeline with it (.ci/run).
wheel: $(VENV)/.deps
	$(VENV)/bin/python -m pip install --quiet "ziglang>=0.13"
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/maturin build --release --zig \
		--compatibility manylinux_2_28 --out dist

WHEEL_VENV := $(TARGET_DIR)/wheel-venv
check-wheel: wheel
	rm -rf $(WHEEL_VENV)
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet dist/stokehold-*-manylinux_2_28_x86_64.whl
	cd $(WHEEL_VENV) && bin/python -c 'import numpy as np, stokehold as sh; \
		ds = sh.from_arrays({"x": np.arange(10)}).shuffle(seed=1).batch(4); \
		assert sorted(int(v) for b in ds for v in b["x"]) == list(range(10)); \
		print("wheel ok:", sh.__file__)'
	$(WHEEL_VENV)/bin/stokehold --version    # the wheel's entry point: the CLI on the PATH

# bench: side-by-side benchmarks (bench/README.md); never part of the test command.
bench:
	python3 bench/run.py
bench-quick:
	python3 bench/run.py --quick

# The tf.data oracle (issue 49, docs/GUIDE.md "tf.data habits"): records ORACLE_COUNT random
# pipelines with TensorFlow (in its own venv, never a test dependency; ORACLE_PY overrides it) and
# runs them in stokehold, which must match each or fall under a documented difference. `make test`
# runs the committed recording (testdata/oracle/tf_oracle.json, made the same way with
# ORACLE_COUNT=600 ORACLE_OUT=testdata/oracle/tf_oracle.json).
ORACLE_VENV := $(TARGET_DIR)/oracle-venv
ORACLE_PY ?= $(ORACLE_VENV)/bin/python
ORACLE_SEED ?= 1
ORACLE_COUNT ?= 5000
ORACLE_OUT ?= $(TARGET_DIR)/oracle.json
oracle: $(VENV)/.deps
	[ -x $(ORACLE_PY) ] || { $(PYTHON) -m venv $(ORACLE_VENV) && \
		$(ORACLE_VENV)/bin/python -m pip install --quiet tensorflow-cpu==2.21.0 numpy; }
	$(ORACLE_PY) testdata/oracle/record.py --seed $(ORACLE_SEED) --count $(ORACLE_COUNT) --out $(ORACLE_OUT)
	VIRTUAL_ENV=$(abspath $(VENV)) PATH="$(abspath $(VENV))/bin:$$PATH" maturin develop --release
	ORACLE_CASES=$(abspath $(ORACLE_OUT)) $(VENV)/bin/python -m pytest python/tests/test_oracle.py -q -s
