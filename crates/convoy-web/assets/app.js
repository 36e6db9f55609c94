// The fleet page: last positions on an offline basemap (Natural Earth
// countries, plus an optional overlay such as a SUMO network's roads),
// a vehicle's track on click, the vehicles and uploads tables, and live
// updates from /api/events. A token given once in the address's
// fragment (/#token=T: a fragment is never sent to a server, so no proxy
// or log sees it) is exchanged at /api/login for an HttpOnly cookie and
// dropped; every request after that, the event stream and the download
// links included, authenticates with the cookie alone.
"use strict";

const given = new URLSearchParams(location.hash.slice(1)).get("token");
if (given) history.replaceState(null, "", location.pathname + location.search);
const state = { vehicles: [], uploads: [], selected: null, markers: new Map(), track: null, fitted: false };
window.convoyState = state;

function showError(msg) {
  const e = document.getElementById("error");
  e.textContent = msg;
  e.hidden = !msg;
}

async function login(token) {
  const r = await fetch("/api/login", { method: "POST", headers: { Authorization: "Bearer " + token } });
  if (!r.ok) throw new Error((await r.json()).error || r.statusText);
}

// A request that hangs must not hold the live refreshes behind it.
const API_TIMEOUT_MS = 10_000;

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin", signal: AbortSignal.timeout(API_TIMEOUT_MS) });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

const map = L.map("map", { zoomControl: true, worldCopyJump: true, preferCanvas: false })
  .setView([45, 8], 4);
// The basemap has a pane of its own below the vehicles, since it arrives
// after them and would otherwise be drawn over them.
map.createPane("basemap");
map.getPane("basemap").style.zIndex = 250;
const basemap = L.layerGroup().addTo(map);
const vehiclesLayer = L.layerGroup().addTo(map);

async function loadBasemap() {
  const topo = await (await fetch("/static/countries-50m.json")).json();
  const land = topojson.feature(topo, topo.objects.countries);
  L.geoJSON(land, { pane: "basemap", style: { color: "#8c969f", weight: 0.6, fillColor: "#eef0e6", fillOpacity: 1 }, interactive: false }).addTo(basemap);
  const overlay = await (await fetch("/static/overlay.json")).json();
  if (overlay.features && overlay.features.length) {
    L.geoJSON(overlay, { pane: "basemap", style: { color: "#9aa3ad", weight: 1.5 }, interactive: false }).addTo(basemap);
  }
}

function age(tNs, nowNs) {
  const s = Math.max(0, (nowNs - tNs) / 1e9);
  if (s < 60) return s.toFixed(1) + " s ago";
  if (s < 3600) return (s / 60).toFixed(1) + " min ago";
  if (s < 86400) return (s / 3600).toFixed(1) + " h ago";
  return (s / 86400).toFixed(1) + " d ago";
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function renderVehicles(doc) {
  state.vehicles = doc.vehicles;
  const tbody = document.querySelector("#vehicles tbody");
  tbody.replaceChildren();
  const seen = new Set();
  for (const v of doc.vehicles) {
    const tr = tbody.insertRow();
    tr.dataset.vehicle = v.name;
    if (v.name === state.selected) tr.className = "selected";
    tr.onclick = () => selectVehicle(v.name);
    cell(tr, v.name + (v.revoked ? " (revoked)" : "") + (v.role === "operator" ? " (operator)" : ""));
    if (v.last) {
      cell(tr, age(v.last.t_ns, doc.now_ns));
      cell(tr, v.last.lat.toFixed(5), "num");
      cell(tr, v.last.lon.toFixed(5), "num");
      cell(tr, v.last.speed == null ? "" : v.last.speed.toFixed(1), "num");
      seen.add(v.name);
      let m = state.markers.get(v.name);
      const pos = [v.last.lat, v.last.lon];
      if (!m) {
        m = L.circleMarker(pos, { radius: 7, color: "#123", weight: 1.5, fillColor: "#e4572e", fillOpacity: 0.95 })
          .bindTooltip(v.name, { permanent: true, direction: "right", className: "vehicle-label" })
          .on("click", () => selectVehicle(v.name))
          .addTo(vehiclesLayer);
        m.getElement && m.getElement() && m.getElement().setAttribute("data-vehicle", v.name);
        state.markers.set(v.name, m);
      } else {
        m.setLatLng(pos);
      }
    } else {
      cell(tr, "never"); cell(tr, ""); cell(tr, ""); cell(tr, "");
    }
  }
  for (const [name, m] of state.markers) {
    if (!seen.has(name)) { vehiclesLayer.removeLayer(m); state.markers.delete(name); }
  }
  document.getElementById("vehicle-count").textContent =
    `${doc.vehicles.length} registered, ${seen.size} on the map`;
  document.body.dataset.markers = String(seen.size);
  if (!state.fitted && seen.size) {
    const b = L.latLngBounds([...state.markers.values()].map((m) => m.getLatLng()));
    map.fitBounds(b.pad(0.3), { maxZoom: 15 });
    state.fitted = true;
  }
}

function renderUploads(doc) {
  state.uploads = doc.uploads;
  const tbody = document.querySelector("#uploads tbody");
  tbody.replaceChildren();
  for (const u of doc.uploads) {
    const tr = tbody.insertRow();
    tr.dataset.vehicle = u.vehicle;
    cell(tr, new Date(u.stored_ns / 1e6).toISOString().replace("T", " ").slice(0, 19));
    cell(tr, u.vehicle);
    const td = tr.insertCell();
    const a = document.createElement("a");
    a.href = `/files/${encodeURIComponent(u.vehicle)}/${u.name.split("/").map(encodeURIComponent).join("/")}`;
    a.textContent = u.name;
    td.appendChild(a);
    cell(tr, u.bytes.toLocaleString("en"), "num");
    cell(tr, u.state, "state-" + u.state).title = u.error || "";
    cell(tr, u.samples ? u.samples.toLocaleString("en") : "", "num");
  }
  document.getElementById("upload-count").textContent = `${doc.uploads.length} newest`;
}

// Requests to vehicles (docs/SERVICE.md, "Requests from the cloud"): the
// page shows them; issuing one takes an operator's token in a header.
function renderRequests(doc) {
  const tbody = document.querySelector("#requests tbody");
  tbody.replaceChildren();
  for (const r of doc.requests) {
    const tr = tbody.insertRow();
    tr.dataset.vehicle = r.vehicle;
    cell(tr, new Date(r.created_ns / 1e6).toISOString().replace("T", " ").slice(0, 19));
    cell(tr, r.vehicle);
    cell(tr, r.kind).title = r.body;
    cell(tr, r.state, "state-" + r.state);
    cell(tr, r.acked_ns ? `${((r.acked_ns - r.created_ns) / 1e6).toFixed(0)} ms` : "", "num");
    let detail = r.error || "";
    if (!detail && r.progress) {
      const p = JSON.parse(r.progress);
      detail = `${p.done}/${p.total} ${p.note}`;
    }
    if (r.state === "done") detail = "done";
    cell(tr, detail).title = r.result || r.error || "";
  }
  document.getElementById("request-count").textContent = `${doc.requests.length} newest`;
}

async function selectVehicle(name) {
  state.selected = name;
  for (const tr of document.querySelectorAll("#vehicles tbody tr")) {
    tr.className = tr.dataset.vehicle === name ? "selected" : "";
  }
  await loadTrack();
}

async function loadTrack() {
  if (!state.selected) return;
  const t = await api("/api/track?vehicle=" + encodeURIComponent(state.selected));
  if (state.track) map.removeLayer(state.track);
  const pts = t.geometry.coordinates.map(([lon, lat]) => [lat, lon]);
  state.track = L.polyline(pts, { color: "#2b6cb0", weight: 3 }).addTo(map);
  document.body.dataset.trackPoints = String(pts.length);
}

async function refresh() {
  try {
    const [v, u, r] = await Promise.all([
      api("/api/vehicles"), api("/api/uploads?limit=200"), api("/api/requests?limit=50")]);
    renderVehicles(v);
    renderUploads(u);
    renderRequests(r);
    await loadTrack();
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString("en-GB");
    document.body.dataset.version = String(v.version);
    showError("");
  } catch (e) {
    showError(String(e.message || e));
  }
}

// Changes on the live feed become refreshes: the first at once, the next
// no sooner than REFRESH_GAP_MS after the last one began, nor than twice
// what it took (a large fleet's documents take longer), nor before it
// ended. A quiet fleet's change shows as soon as it is fetched; a busy
// one's within a gap, one refresh covering all that came meanwhile.
// The fleet experiment's poller (python/convoy_lab/fleet/scale.py) keeps
// the same schedule.
const REFRESH_GAP_MS = 100;
const refreshing = { timer: null, running: false, again: false, began: -Infinity, took: 0 };

// A refresh, timed for the schedule.
async function timedRefresh() {
  refreshing.running = true;
  refreshing.again = false;
  refreshing.began = performance.now();
  await refresh();
  refreshing.took = performance.now() - refreshing.began;
  refreshing.running = false;
}

function refreshSoon() {
  if (refreshing.timer) return;  // a refresh is due and will fetch this change
  if (refreshing.running) { refreshing.again = true; return; }
  const wait = refreshing.began + Math.max(REFRESH_GAP_MS, 2 * refreshing.took) - performance.now();
  refreshing.timer = setTimeout(async () => {
    refreshing.timer = null;
    await timedRefresh();
    if (refreshing.again) refreshSoon();
  }, Math.max(0, wait));
}

function listen() {
  const badge = document.getElementById("live");
  const es = new EventSource("/api/events");
  es.addEventListener("open", () => { badge.dataset.live = "on"; badge.textContent = "live"; });
  es.addEventListener("error", () => { badge.dataset.live = "off"; badge.textContent = "reconnecting…"; });
  es.addEventListener("change", refreshSoon);
}

(async function main() {
  try {
    if (given) await login(given);
    const me = await api("/api/me");
    document.getElementById("who").textContent = (me.operator ? "operator " : "vehicle ") + me.name;
  } catch (e) {
    const msg = String(e.message || e);
    showError(given ? msg : msg + ": open this page as /#token=TOKEN (convoy fleet token NAME --key server.key --dir DIR)");
    return;
  }
  loadBasemap().catch((e) => showError("basemap: " + e));
  await timedRefresh();
  // After the load event: an open event stream must not hold it back.
  if (document.readyState === "complete") listen();
  else window.addEventListener("load", listen);
})();
