# raidlab: two commands do everything on a fresh machine.
#   make demo   create .venv, build, run the VDF reproduction on built-in synthetic data
#   make test   Rust tests (fmt, clippy, cargo test) + pytest
#   make soak   long crash soaks: ext4 and XFS on the served store, SIGKILLed 50 times per cell;
#               host failures of remote members (make soak-remote)
PY      ?= python3
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
# libCacheSim's Python wheel, the peer of the live parity tests (tests/test_libcachesim_*.py)
# and of the benchmark. Its own stamp: where no wheel installs (it is built for Linux x86-64
# and macOS, CPython 3.10-3.13) `make test` goes on and those tests skip, saying why.
LCS     := libcachesim==0.3.5
LCS_STAMP := $(VENV)/.libcachesim
SOURCES := $(shell find crates python -name '*.rs' -o -name '*.py' -o -name '*.pyi' -o -name Cargo.toml) pyproject.toml Cargo.toml
# TLS-PSK (`raidlab serve --tls-psk`) runs on OpenSSL: the `tls-psk` feature is on where
# pkg-config finds it (scripts/ensure-ssl-dev.sh installs libssl-dev and pkg-config when
# root on Debian). Without it the build goes on and `--tls-psk` says what it lacks.
TLS_PSK := $(shell sh scripts/ensure-ssl-dev.sh; pkg-config --exists openssl 2>/dev/null && echo 1)
CARGO_FEATURES := $(if $(TLS_PSK),--features raidlab-store/tls-psk)
export MATURIN_PEP517_ARGS := $(if $(TLS_PSK),--features tls-psk)

.PHONY: demo test test-rust test-python bench soak soak-sched soak-fs soak-remote fuzz-build clean

$(VPY):
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip

$(STAMP): $(VPY) $(SOURCES)
	$(VPY) -m pip install --quiet "maturin>=1.5,<2"
	$(VPY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

$(LCS_STAMP): $(VPY)
	@if $(VPY) -m pip install --quiet "$(LCS)"; then touch $@; else \
		rm -f $@; echo "warning: $(LCS) did not install: the live libCacheSim parity tests will skip"; fi

demo: $(STAMP)
	$(VENV)/bin/raidlab demo

test: test-rust test-python

test-rust:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(if $(TLS_PSK),cargo clippy --workspace --all-targets $(CARGO_FEATURES) -- -D warnings)
	cargo clippy -p raidlab-store --all-targets --features shuttle -- -D warnings
	cargo test --workspace $(CARGO_FEATURES)
	# The store under a controlled scheduler: a few runs per configuration (make soak: 10,000).
	cargo test -p raidlab-store --features shuttle --test sched

# Once the wheel installed, the parity tests must find it (RAIDLAB_REQUIRE_LIBCACHESIM): a
# broken install fails them instead of skipping them. Likewise the TLS-PSK tests where
# OpenSSL was found (RAIDLAB_REQUIRE_TLS_PSK).
# Two pytest workers (pytest-xdist; a file's tests stay on one worker, so a module's fixtures
# are built once): most store tests wait on servers, members and file systems, not a CPU.
PYTEST_WORKERS ?= 2
test-python: $(STAMP) $(LCS_STAMP)
	-@sh scripts/ensure-debs.sh
	RAIDLAB_REQUIRE_LIBCACHESIM=$$(test -f $(LCS_STAMP) && echo 1) RAIDLAB_REQUIRE_TLS_PSK=$(TLS_PSK) $(VPY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile


bench: $(STAMP)
	$(VPY) -m pip install --quiet "$(LCS)"
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
	$(VPY) benches/bench_store_scale.py
	$(VPY) benches/bench_tls.py
	# Remote members on emulated hosts (needs root and namespaces; exit 77 is a skip).
	$(VPY) benches/bench_remote.py || [ $$? -eq 77 ]

# Long runs that do not fit in `make test` (hours): the store's scheduled runs, SCHED_RUNS
# per configuration with a crash state cut from each, then SOAK_RUNS kills per file system x
# write-cache mode x event (needs root, FUSE, loop devices).
SCHED_RUNS ?= 10000
SCHED_SEED ?= 1
SOAK_RUNS ?= 50
soak: soak-sched soak-fs soak-remote

soak-sched:
	RAIDLAB_SCHED_RUNS=$(SCHED_RUNS) RAIDLAB_SCHED_SEED=$(SCHED_SEED) RAIDLAB_SCHED_CRASHES=1 \
		cargo test --profile soak -p raidlab-store --features shuttle --test sched -- --nocapture --test-threads 2

soak-fs: $(STAMP)
	-@sh scripts/ensure-debs.sh
	$(VPY) scripts/fs_crash_soak.py --runs $(SOAK_RUNS) --strict

# Host failures of remote members: every level x write mode x fault on emulated hosts
# (network namespaces, veth pairs, nbdkit); the table in docs/store.md (Remote members).
soak-remote: $(STAMP)
	-@sh scripts/ensure-debs.sh
	$(VPY) scripts/remote_faults.py --member-mib 16

clean:
	rm -rf $(VENV) target results
