# The two commands README promises: `make demo` and `make test`. Both install
# what is missing first (scripts/setup.sh), so they work on a fresh machine.

SHELL := /bin/bash
CARGO ?= cargo
PYTHON := .venv/bin/python
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: demo reproduce test setup build bench fuzz fuzz-deep lint

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

# The main job: convoy beside real kernel TCP (cubic, bbr, reno) over
# `convoy emu`, on the 50 Mbit/s loss sweep and the short form of the
# cellular drive-trace evaluation (5 to 7 minutes after the build). Writes
# $(RESULTS)/report.html and prints the paper's figures and issue 15's
# targets beside ours. Needs root (convoy emu).
# `make reproduce` runs every experiment at full length (about 4.5 hours per seed).
SHARED ?= ../shared
RESULTS ?= results
SEEDS ?= 1
LAB := CONVOY_SHARED=$(abspath $(SHARED)) $(PYTHON) -m convoy_lab.experiments
demo: build
	$(LAB) demo --out $(RESULTS)

reproduce: build
	$(LAB) reproduce --out $(RESULTS) --seeds $(SEEDS)

# Every test: Rust (unit, property, integration) in release mode, because the
# property tests push millions of symbols, then the Python package's tests.
# Optional features whose code and tests must not rot are turned on here.
FEATURES := --features convoy-net/tokio
test: setup
	$(CARGO) test --workspace --release $(FEATURES)
	$(PYTHON) -m pytest -q python/tests

lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets $(FEATURES) -- -D warnings

bench: setup
	$(CARGO) bench -p convoy-codec

# Coverage-guided fuzzing of the codec's decoder input and of the wire parsers (needs nightly).
FUZZ_SECONDS ?= 60
fuzz:
	cargo install --locked cargo-fuzz
	cd fuzz && cargo +nightly fuzz run decoder_input -- -max_total_time=$(FUZZ_SECONDS)
	cd fuzz && cargo +nightly fuzz run wire_packet -- -max_total_time=$(FUZZ_SECONDS)

# Every parser at depth: packet, frames, requests, handshake messages, trace
# files and the codec's decoder input, FUZZ_RUNS executions each (10^7 by
# default), without a sanitizer (safe Rust; several times faster), and
# prints each target's count.
FUZZ_RUNS ?= 10000000
FUZZ_TARGETS := wire_packet frames frame_sequence request handshake trace_files decoder_input
fuzz-deep:
	@command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  cargo +nightly fuzz run -s none $$t -- -runs=$(FUZZ_RUNS) -print_final_stats=1 2>&1 | grep -E "stat::number_of_executed_units|ERROR|panicked" | sed "s/^/$$t: /" || exit 1; \
	done
