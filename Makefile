# The two commands README promises: `make demo` and `make test`. Both install
# what is missing first (scripts/setup.sh), so they work on a fresh machine.

SHELL := /bin/bash
CARGO ?= cargo
PYTHON := .venv/bin/python
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: demo test setup build bench fuzz lint

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

# The main job. Until the experiments exist, it measures the codec and the
# link model on this machine and simulates one RCDP transfer.
SHARED ?= ../shared
DEMO_TRACE := $(SHARED)/traces/TMobile-LTE-short.down
demo: build
	./target/release/convoy bench codec
	./target/release/convoy bench link $(if $(wildcard $(DEMO_TRACE)),--trace $(DEMO_TRACE))
	./target/release/convoy simulate --mode rcdp --rate 20mbit --delay 25ms --loss 10% --size 10MB

# Every test: Rust (unit, property, integration) in release mode, because the
# property tests push millions of symbols, then the Python package's tests.
test: setup
	$(CARGO) test --workspace --release
	$(PYTHON) -m pytest -q python/tests

lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench: setup
	$(CARGO) bench -p convoy-codec

# Coverage-guided fuzzing of the codec's decoder input and of the wire parsers (needs nightly).
FUZZ_SECONDS ?= 60
fuzz:
	cargo install --locked cargo-fuzz
	cd fuzz && cargo +nightly fuzz run decoder_input -- -max_total_time=$(FUZZ_SECONDS)
	cd fuzz && cargo +nightly fuzz run wire_packet -- -max_total_time=$(FUZZ_SECONDS)
