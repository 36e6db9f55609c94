"""Headless Chromium from Debian's packages, driven by Playwright
(executable_path: Playwright never downloads a browser of its own)."""

from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

# The flags that work on a machine without outside network: no
# background connections, no sandbox as root, a fresh profile.
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str:
    path = shutil.which("chromium")
    if not path:
        raise RuntimeError("chromium not found: run scripts/setup.sh (apt-get install chromium)")
    return path


@contextmanager
def page(width: int = 1400, height: int = 860, ignore_https_errors: bool = False):
    """A page in a fresh profile; `ignore_https_errors` for a server whose
    certificate the test made (self-signed)."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="convoy-chromium-") as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=chromium_path(), headless=True, args=FLAGS,
            viewport={"width": width, "height": height}, ignore_https_errors=ignore_https_errors)
        try:
            yield ctx.pages[0] if ctx.pages else ctx.new_page()
        finally:
            ctx.close()


def screenshot(url: str, out: Path, wait_markers: int = 1, timeout_s: float = 30) -> dict:
    """Opens the fleet page, waits until `wait_markers` vehicles are on the
    map, selects the first vehicle (its track), and saves a screenshot."""
    with page() as p:
        p.goto(url, wait_until="domcontentloaded")
        p.wait_for_function(f"Number(document.body.dataset.markers || 0) >= {wait_markers}",
                            timeout=timeout_s * 1000)
        first = p.locator("#vehicles tbody tr").first
        first.click()
        p.wait_for_function("Number(document.body.dataset.trackPoints || 0) > 0", timeout=timeout_s * 1000)
        p.wait_for_timeout(500)
        out.parent.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(out))
        return {
            "markers": int(p.evaluate("document.body.dataset.markers")),
            "vehicle_rows": p.locator("#vehicles tbody tr").count(),
            "upload_rows": p.locator("#uploads tbody tr").count(),
            "live": p.get_attribute("#live", "data-live"),
        }
