"""The web view in a real headless Chromium (Debian's), driven by
Playwright, over TLS (a certificate made for the run) with the cookie
login: the page shows the vehicles on the map and in the tables, follows
live updates without a reload, draws a track, and a vehicle's token shows
only that vehicle."""

import subprocess
import time

import pytest

from convoy_lab.fleet import Service, drive_lines
from convoy_lab.fleet.browser import page
from convoy_lab.fleet.requests import post_request
from convoy_lab.runner import ConvoyNotFound, convoy_binary


@pytest.fixture
def service(tmp_path):
    try:
        convoy_binary()
    except ConvoyNotFound as e:
        pytest.fail(str(e))
    with Service(tmp_path / "fleet", ["truck-1", "bus-2"], tls=True) as s:
        yield s


def upload(s: Service, who: str, lines: str) -> None:
    cfg = s.agent_config(who, '[[source]]\nkind = "stdin"\n')
    p = subprocess.run([str(convoy_binary()), "agent", "--until-idle", "--config", str(cfg)],
                       input=lines, text=True, capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr


def wait_indexed(s: Service, n: int) -> None:
    deadline = time.time() + 30
    while time.time() < deadline:
        rows = s.api("/api/uploads")["uploads"]
        if sum(r["state"] == "indexed" for r in rows) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"not indexed: {rows}\n{s.log()}")


def test_the_page_shows_the_fleet_and_follows_live_updates(service, tmp_path):
    now = time.time()
    upload(service, "truck-1", drive_lines(60, now - 60, 45.07))
    wait_indexed(service, 1)
    with page(ignore_https_errors=True) as p:
        assert service.page_url("ops").startswith("https://")
        p.goto(service.page_url("ops"), wait_until="domcontentloaded")
        p.wait_for_function("document.body.dataset.markers === '1'", timeout=20_000)
        assert p.get_attribute("#live", "data-live") == "on" or p.wait_for_function(
            "document.querySelector('#live').dataset.live === 'on'", timeout=10_000)
        rows = p.locator("#vehicles tbody tr")
        assert rows.count() == 3  # truck-1, bus-2 and the operator
        assert "truck-1" in p.inner_text("#vehicles") and "bus-2" in p.inner_text("#vehicles")
        assert p.locator("#uploads tbody tr").count() == 1
        assert "indexed" in p.inner_text("#uploads")
        # The token left the address bar; the page holds an HttpOnly cookie
        # (scripts cannot read it).
        assert "token=" not in p.url
        assert p.evaluate("document.cookie") == ""
        cookies = {c["name"]: c for c in p.context.cookies()}
        assert cookies["convoy_token"]["httpOnly"] and cookies["convoy_token"]["secure"]
        # A new vehicle reports: the page shows it without a reload.
        upload(service, "bus-2", drive_lines(20, time.time() - 20, 45.08, 7.69))
        p.wait_for_function("document.body.dataset.markers === '2'", timeout=20_000)
        assert p.locator("#uploads tbody tr").count() == 2
        # Clicking a vehicle draws its track.
        p.locator("#vehicles tbody tr[data-vehicle='truck-1']").click()
        p.wait_for_function("Number(document.body.dataset.trackPoints || 0) >= 6", timeout=10_000)
        assert p.locator("path.leaflet-interactive").count() >= 3  # 2 markers + the track
        # A request to a vehicle that is away: listed as queued, live.
        code, _ = post_request(service, service.token("ops"), "truck-1", {"type": "status"})
        assert code == 200
        p.wait_for_function("document.querySelectorAll('#requests tbody tr').length === 1", timeout=10_000)
        assert "queued" in p.inner_text("#requests") and "status" in p.inner_text("#requests")
        # The offline basemap is drawn (no tile server involved).
        assert p.locator(".leaflet-tile").count() == 0
        p.screenshot(path=str(tmp_path / "fleet.png"))
    with page(ignore_https_errors=True) as p:
        # A vehicle's own token shows only that vehicle.
        p.goto(service.page_url("bus-2"), wait_until="domcontentloaded")
        p.wait_for_function("document.body.dataset.markers === '1'", timeout=20_000)
        assert "truck-1" not in p.inner_text("#vehicles")
        assert p.locator("#uploads tbody tr").count() == 1
    with page(ignore_https_errors=True) as p:
        p.goto(f"{service.base_url}/#token=ops~99999999999~*~00", wait_until="domcontentloaded")
        p.wait_for_selector("#error:not([hidden])", timeout=10_000)
        assert "invalid token" in p.inner_text("#error")
