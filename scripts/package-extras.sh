#!/usr/bin/env bash
# What the .deb carries beside the binary, made by the binary itself from
# its clap definitions: man pages (gzipped, as Debian installs them) and
# bash, zsh and fish completions. `make man` and `make deb` run it.
# Usage: scripts/package-extras.sh BINARY OUTDIR
set -euo pipefail
bin=${1:?binary}
out=${2:?output directory}
rm -rf "$out"
mkdir -p "$out/man" "$out/completions"
"$bin" man --out "$out/man" >/dev/null
gzip -9n "$out"/man/*.1
"$bin" completions bash > "$out/completions/convoy.bash"
"$bin" completions zsh > "$out/completions/_convoy"
"$bin" completions fish > "$out/completions/convoy.fish"
echo "package extras: $(ls "$out/man" | wc -l) man pages and 3 completions in $out"
