# raidlab: two commands do everything on a fresh machine.
#   make demo   create .venv, build, run the VDF reproduction on built-in synthetic data
#   make test   Rust tests (fmt, clippy, cargo test) + pytest
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
SOURCES := $(shell find crates python -name '*.rs' -o -name '*.py' -o -name '*.pyi' -o -name Cargo.toml) pyproject.toml Cargo.toml

.PHONY: demo test test-rust test-python bench soak fuzz-build clean

$(VPY):
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip

$(STAMP): $(VPY) $(SOURCES)
	$(VPY) -m pip install --quiet "maturin>=1.5,<2"
	$(VPY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/raidlab demo

test: test-rust test-python

test-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo clippy -p raidlab-store --all-targets --features shuttle -- -D warnings
	cargo test --workspace
	# The store under a controlled scheduler: a few runs per configuration (make soak: 10,000).
	cargo test -p raidlab-store --features shuttle --test sched

test-python: $(STAMP)
	-@sh scripts/ensure-debs.sh
	$(VPY) -m pytest -q

bench: $(STAMP)
	$(VPY) -m pip install --quiet "libcachesim==0.3.5"
	$(VPY) benches/bench_count.py
	$(VPY) benches/bench_curve.py
	$(VPY) benches/bench_scale.py
	$(VPY) benches/bench_timed.py
	$(VPY) benches/bench_xray.py
	$(VPY) benches/bench_rebuild.py
	$(VPY) benches/bench_sweep.py
	$(VPY) benches/bench_stow.py
	$(VPY) benches/bench_rapid.py
	$(VPY) benches/bench_store.py
	$(VPY) benches/bench_store_wb.py

# Long runs that do not fit in `make test`: the store's scheduled runs, 10,000 per
# configuration with a crash state cut from each (SCHED_RUNS, SCHED_SEED to change).
SCHED_RUNS ?= 10000
SCHED_SEED ?= 1
soak:
	RAIDLAB_SCHED_RUNS=$(SCHED_RUNS) RAIDLAB_SCHED_SEED=$(SCHED_SEED) RAIDLAB_SCHED_CRASHES=1 \
		cargo test --profile soak -p raidlab-store --features shuttle --test sched -- --nocapture --test-threads 2

clean:
	rm -rf $(VENV) target results
