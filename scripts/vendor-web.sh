#!/usr/bin/env bash
# Refreshes the web view's vendored front-end packages (crates/convoy-web/
# assets/vendor) from the npm registry: Leaflet (BSD-2-Clause), Natural
# Earth country outlines from world-atlas (ISC; the data is public domain)
# and topojson-client (ISC). They are committed, unchanged and with their
# licences, so the binary serves them itself: no CDN, no tile server, no
# network at run time.
set -euo pipefail
cd "$(dirname "$0")/.."
out=crates/convoy-web/assets/vendor
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent leaflet@1.9.4 world-atlas@2.0.2 topojson-client@3.1.0 >/dev/null)
for f in "$tmp"/*.tgz; do d="$tmp/$(basename "$f" .tgz)"; mkdir -p "$d"; tar xzf "$f" -C "$d"; done
cp "$tmp"/leaflet-1.9.4/package/dist/leaflet.js "$tmp"/leaflet-1.9.4/package/dist/leaflet.css "$out"/
cp "$tmp"/leaflet-1.9.4/package/LICENSE "$out"/LICENSE.leaflet
cp "$tmp"/topojson-client-3.1.0/package/dist/topojson-client.min.js "$out"/
cp "$tmp"/topojson-client-3.1.0/package/LICENSE "$out"/LICENSE.topojson-client
cp "$tmp"/world-atlas-2.0.2/package/countries-50m.json "$out"/
cp "$tmp"/world-atlas-2.0.2/package/LICENSE "$out"/LICENSE.world-atlas
echo "vendored into $out"
