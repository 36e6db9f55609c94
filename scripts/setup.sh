#!/usr/bin/env bash
# Installs whatever convoy needs that this machine lacks, and nothing else:
# a Rust toolchain with rustfmt and clippy (and, on x86-64, what cross builds
# for aarch64 and their tests under qemu need), and the Python experiment
# package with its test dependencies. Safe to run again; it only checks when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*" >&2; }

need_apt=()
# cc for the Rust crates with C in them; c++ and make for protoc, which the
# KUKSA SDK builds from source (protobuf-src).
{ command -v cc && command -v c++ && command -v make; } >/dev/null 2>&1 || need_apt+=(build-essential)
command -v curl >/dev/null 2>&1 || need_apt+=(curl ca-certificates)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip python3-venv)
# convoy emu and its tests: iproute2 configures the namespaces; ping, iperf3,
# tshark and mptcpize (mptcpd) are the unmodified programs run over them.
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v ping >/dev/null 2>&1 || need_apt+=(iputils-ping)
command -v iperf3 >/dev/null 2>&1 || need_apt+=(iperf3)
command -v tshark >/dev/null 2>&1 || need_apt+=(tshark)
command -v mptcpize >/dev/null 2>&1 || need_apt+=(mptcpd)
# The coexistence experiments' VoIP flow (smart-ap, background).
command -v irtt >/dev/null 2>&1 || need_apt+=(irtt)
# The data service's tests: a throwaway PostgreSQL cluster (initdb and
# pg_ctl from Debian's package) and headless Chromium for the web view.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium fonts-dejavu-core)
# The web view's TLS test makes its certificate with the openssl command.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# promtool (Debian's prometheus package) validates the /metrics pages.
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
# `make test-deb` checks the Debian package with lintian (errors fail it).
command -v lintian >/dev/null 2>&1 || need_apt+=(lintian)
# The agent's MQTT source is tested against a real broker, started by the
# test on a free loopback port, and messages sent by mosquitto_pub; the
# incumbents experiment runs it as the MQTT stack convoy is measured against.
[ -x /usr/sbin/mosquitto ] || command -v mosquitto >/dev/null 2>&1 || need_apt+=(mosquitto)
command -v mosquitto_pub >/dev/null 2>&1 || need_apt+=(mosquitto-clients)
# aarch64 vehicle computers, from an x86-64 machine: `make arm64` links with
# Debian's cross gcc (which brings the aarch64 glibc), and `make test` runs
# the aarch64 test subset under qemu-user. An aarch64 machine builds natively.
cross_arm64=
if [ "$(uname -m)" != aarch64 ]; then
    cross_arm64=1
    command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need_apt+=(gcc-aarch64-linux-gnu)
    command -v qemu-aarch64-static >/dev/null 2>&1 || need_apt+=(qemu-user-static)
fi
if ((${#need_apt[@]})); then
    say "installing Debian packages: ${need_apt[*]}"
    if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}"
fi

# Rust: the workspace's rust-version (GFNI intrinsics need 1.89).
min_rust=$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml)
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    say "installing Rust with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
        | sh -s -- -y --profile minimal --component rustfmt,clippy \
        || { say "could not install Rust: install rustup, then re-run"; exit 1; }
    export PATH="$HOME/.cargo/bin:$PATH"
fi
rust_version=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n%s\n' "$min_rust" "$rust_version" | sort -V | head -n1)" != "$min_rust" ]; then
    if command -v rustup >/dev/null 2>&1; then
        say "Rust $rust_version is older than $min_rust: updating the stable toolchain"
        rustup update stable && rustup default stable
    else
        say "Rust $rust_version is older than the $min_rust convoy needs: install rustup and re-run"
        exit 1
    fi
fi
if command -v rustup >/dev/null 2>&1; then
    for component in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$component" \
            || rustup component add "$component"
    done
    if [ -n "$cross_arm64" ] && ! rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
        say "adding the Rust target aarch64-unknown-linux-gnu (make arm64, and make test's aarch64 subset)"
        rustup target add aarch64-unknown-linux-gnu
    fi
fi

# The S3-compatible server the data service's tests run against:
# versitygw (Apache-2.0), built from the Go module proxy into .tools/bin.
VERSITYGW_VERSION=v1.8.0
if [ ! -x .tools/bin/versitygw ]; then
    if ! command -v go >/dev/null 2>&1; then
        say "Go is needed to build versitygw (the S3 server of the tests): install Go >= 1.24, then re-run"
        exit 1
    fi
    say "building versitygw $VERSITYGW_VERSION (S3-compatible server for the tests) into .tools/bin"
    GOBIN="$PWD/.tools/bin" GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
fi

# Python: a virtual environment in .venv, so nothing touches the system's
# packages.
if [ ! -x .venv/bin/python ]; then
    say "creating the Python environment in .venv"
    if ! python3 -m venv .venv 2>/dev/null; then
        rm -rf .venv
        say "installing python3-venv"
        if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv
        python3 -m venv .venv
    fi
fi
if ! .venv/bin/python -c 'import convoy_lab, pytest, pandas, sumo, libsumo, sumolib, matplotlib, distributed, playwright, paho.mqtt, boto3' >/dev/null 2>&1; then
    say "installing the convoy_lab Python package (editable), its test tools, Dask and the incumbents' clients (paho-mqtt, boto3) into .venv"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e 'python[test,cluster,incumbents]'
fi
