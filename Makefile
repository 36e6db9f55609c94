# The two commands README promises: `make demo` and `make test`. Both install
# what is missing first (scripts/setup.sh), so they work on a fresh machine.

SHELL := /bin/bash
CARGO ?= cargo
PYTHON := .venv/bin/python
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: demo reproduce results test man deb test-deb multipath-sweep test-stress test-arm64 arm64 arm64-toolchain setup build bench bench-http oha fuzz fuzz-deep lint

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

# The main job: convoy beside real kernel TCP (cubic, bbr, reno) over
# `convoy emu`, on the 50 Mbit/s loss sweep and the short form of the
# cellular drive-trace evaluation (5 to 7 minutes after the build). Writes
# $(RESULTS)/report.html and prints the paper's figures and issue 15's
# targets beside ours. Needs root (convoy emu).
# `make reproduce` runs every experiment at full length, the fleet simulator's
# and VACaMobil's table included (many hours per seed; EXPERIMENTS.md gives
# each one's length); ONLY=a,b or SKIP=c,d run it in parts. Each finished
# experiment's summary (runs.csv, meta.json) is copied into $(KEEP), which
# the repository tracks, so parts run on different days add up: `make
# results` renders docs/RESULTS.md and README's headline table from it.
# An experiment longer than a sitting (cellular, background) runs in parts
# with RESUME=1: stopped with Ctrl-C, its finished runs are kept, and the
# next RESUME=1 runs only what is missing.
SHARED ?= ../shared
RESULTS ?= results
SEEDS ?= 1
ONLY ?=
SKIP ?=
KEEP ?= reproduced
RESUME ?=
LAB := CONVOY_SHARED=$(abspath $(SHARED)) $(PYTHON) -m convoy_lab.experiments
demo: build
	$(LAB) demo --out $(RESULTS)

reproduce: build
	$(LAB) reproduce --out $(RESULTS) --keep $(KEEP) --seeds $(SEEDS) $(if $(ONLY),--only $(ONLY)) $(if $(SKIP),--skip $(SKIP)) $(if $(filter 1 yes true,$(RESUME)),--resume)

results:
	$(LAB) results --out $(KEEP)

# Every test: Rust (unit, property, integration) in release mode, because the
# property tests push millions of symbols, then the Python package's tests.
# Optional features whose code and tests must not rot are turned on here.
FEATURES := --features convoy-net/tokio
test: setup
	$(CARGO) test --workspace --release $(FEATURES)
	$(MAKE) --no-print-directory test-arm64
	$(PYTHON) -m pytest -q python/tests

# The multipath scenarios in virtual time over the whole grid of starts:
# initial windows {16,24,32,40,48,64} x seeds 1-10 x link rates x{0.25,1,4}
# (about 20 minutes on two cores). Prints each figure's min/median/max per
# rate and fails on the worst point of any bound; `make test` runs its fast
# tier. SWEEP_WINDOWS, SWEEP_SEEDS, SWEEP_SCALES (comma-separated) run a part.
multipath-sweep:
	$(CARGO) test --release -p convoy-proto --test multipath_sweep -- --ignored --nocapture

# `make test` as a busy vehicle computer or CI machine would run it: two
# busy loops at nice 19 beside the suite, RUNS times (5 by default), each
# run's outcome in $(STRESS_LOG). A test that passes only on a quiet
# machine fails here. The loops end with the target, even on failure.
RUNS ?= 5
STRESS_LOG ?= test-stress.log
test-stress: setup
	@scripts/test-stress.sh $(RUNS) $(STRESS_LOG)

# aarch64, the vehicle computers' architecture, cross-built from x86-64:
# Debian's cross gcc links, qemu-user runs test binaries (`-L` points it at
# the aarch64 glibc the cross gcc brought). Set here rather than in
# .cargo/config.toml so that a native build on an ARM board, even with an
# explicit --target, is never sent through a cross linker or qemu.
ARM64 := aarch64-unknown-linux-gnu
HOST_ARCH := $(shell uname -m)
ARM64_ENV := CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
	CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64-static -L /usr/aarch64-linux-gnu"

# One line saying what to install when a cross build cannot work.
arm64-toolchain:
	@command -v aarch64-linux-gnu-gcc >/dev/null || { echo "arm64: aarch64-linux-gnu-gcc not found: install Debian's gcc-aarch64-linux-gnu (scripts/setup.sh does)" >&2; exit 1; }
	@rustc --print sysroot >/dev/null && [ -d "$$(rustc --print sysroot)/lib/rustlib/$(ARM64)" ] || { echo "arm64: Rust's standard library for $(ARM64) not found: rustup target add $(ARM64) (scripts/setup.sh does)" >&2; exit 1; }

# The codec's aarch64 code (the NEON tier) is linted for its own target:
# clippy only type-checks, so this needs the Rust target, not the cross gcc.
# The clippy with `--features fuzzing` covers convoy-proto's copies (Clone on
# Endpoint), which only the fuzz targets build.
lint: setup
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets $(FEATURES) -- -D warnings
	$(CARGO) clippy -p convoy-proto --features fuzzing,hostile -- -D warnings
ifneq ($(HOST_ARCH),aarch64)
	$(CARGO) clippy --target $(ARM64) -p convoy-codec --all-targets -- -D warnings
endif

# Man pages (gzipped) and bash, zsh and fish completions, made by the
# binary from its clap definitions, in target/package/{man,completions}.
# `man -l target/package/man/convoy-serve.1.gz` reads one.
man:
	$(CARGO) build --release -p convoy
	scripts/package-extras.sh target/release/convoy target/package

# The Debian package (cargo-deb, installed with cargo if missing):
# target/debian/convoy_VERSION-1_ARCH.deb with the binary, the systemd
# units of packaging/, the example configurations in /etc/convoy, man pages
# and completions (crates/convoy/Cargo.toml, [package.metadata.deb]).
deb: man
	@command -v cargo-deb >/dev/null || $(CARGO) install --locked cargo-deb
	$(CARGO) deb -p convoy --no-build --strip
	@ls -l target/debian/convoy_*.deb

# The package looked at from outside: dpkg-deb --info and --contents, its
# files extracted and run, the units verified, `dpkg --dry-run -i`, and
# lintian (scripts/setup.sh installs it). Not in `make test`: it builds the package.
test-deb: deb
	$(CARGO) test --release -p convoy --test packaging -- --ignored --nocapture

# The release binary for an ARM vehicle computer:
# target/aarch64-unknown-linux-gnu/release/convoy (`make deb` packages the
# native build only).
arm64: setup
ifeq ($(HOST_ARCH),aarch64)
	$(CARGO) build --release -p convoy
else
	@$(MAKE) --no-print-directory arm64-toolchain
	$(ARM64_ENV) $(CARGO) build --release --target $(ARM64) -p convoy
endif

# The aarch64 subset of `make test`, under qemu: the codec's kernel,
# property and unit tests, where the NEON tier is the one chosen, and
# convoy-proto's unit tests and virtual-time stall tests (about 20 s under
# qemu). Skipped on an aarch64 machine, whose `cargo test --workspace`
# covers it natively. Left out: convoy-proto's multipath tests (7.5 min
# under qemu) and anything needing the whole convoy binary (about 20 min
# of CPU to cross-build cold; see README, "aarch64 under qemu").
# env_override_selects_tier re-runs its own test binary as a child, which
# needs binfmt_misc to start an aarch64 executable (containers rarely have
# it); the override logic is the same code on every architecture and that
# test runs in the x86 pass.
test-arm64:
ifeq ($(HOST_ARCH),aarch64)
	@echo "test-arm64: on aarch64 already, covered by cargo test --workspace"
else
	@$(MAKE) --no-print-directory arm64-toolchain
	@command -v qemu-aarch64-static >/dev/null || { echo "test-arm64: qemu-aarch64-static not found: install Debian's qemu-user-static (scripts/setup.sh does)" >&2; exit 1; }
	$(ARM64_ENV) $(CARGO) test --release --target $(ARM64) -p convoy-codec -- --skip env_override_selects_tier
	$(ARM64_ENV) $(CARGO) test --release --target $(ARM64) -p convoy-proto --lib --test stall
endif

bench: setup
	$(CARGO) bench -p convoy-codec

# The web view under a real load generator (issue 34's HTTP targets):
# oha drives /api/positions on 1,000 vehicles with 100 keep-alive clients
# while uploads run beside it; also /metrics and 1,000 live-feed
# subscribers. HTTP_SECONDS of load.
HTTP_SECONDS ?= 20
bench-http: build oha
	target/release/convoy fleet bench --samples 200000 --http-load $(HTTP_SECONDS)

# oha, the HTTP load generator, into .tools/bin (a pinned version).
oha:
	@[ -x .tools/bin/oha ] || $(CARGO) install --locked --version 1.16.0 --root .tools oha

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
FUZZ_TARGETS := wire_packet frames frame_sequence request handshake trace_files can_lines web_inputs decoder_input
fuzz-deep:
	@command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  cargo +nightly fuzz run -s none $$t -- -runs=$(FUZZ_RUNS) -print_final_stats=1 2>&1 | grep -E "stat::number_of_executed_units|ERROR|panicked" | sed "s/^/$$t: /" || exit 1; \
	done
