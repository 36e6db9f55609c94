#!/usr/bin/env bash
# Installs whatever convoy needs that this machine lacks, and nothing else:
# a Rust toolchain with rustfmt and clippy, and the Python experiment package
# with its test dependencies. Safe to run again; it only checks when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*" >&2; }

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v curl >/dev/null 2>&1 || need_apt+=(curl ca-certificates)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip python3-venv)
if ((${#need_apt[@]})); then
    say "installing Debian packages: ${need_apt[*]}"
    if [ "$(id -u)" -ne 0 ]; then sudo=sudo; else sudo=; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    say "installing Rust with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
        | sh -s -- -y --profile minimal --component rustfmt,clippy \
        || { say "could not install Rust: install rustup from your distribution, then re-run"; exit 1; }
    export PATH="$HOME/.cargo/bin:$PATH"
fi
if command -v rustup >/dev/null 2>&1; then
    for component in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$component" \
            || rustup component add "$component"
    done
fi

if ! python3 -c 'import convoy_lab, pytest, pandas' >/dev/null 2>&1; then
    say "installing the convoy_lab Python package (editable) and its test tools"
    python3 -m pip install --quiet --disable-pip-version-check -e 'python[test]' \
        || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages -e 'python[test]'
fi
