"""A class the link in use stops allowing pauses mid-upload (issue 36,
item 5), with real processes on loopback: a bulk file uploads over Wi-Fi;
the link file switches to a metered LTE link that carries no bulk; the
server's partial file stops growing within 1 s; back on Wi-Fi the upload
resumes from the byte the server had, so nothing it held is sent again."""

import os
import re
import time

from convoy_lab.fleet import Service

SIZE = 400 * 1000 * 1000


def partial_size(s: Service) -> int:
    d = s.store / ".convoy-partial"
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) if d.exists() else 0


def test_a_bulk_upload_pauses_on_a_metered_link_and_resumes_where_it_stopped(service, tmp_path):
    s = service
    link, inbox = tmp_path / "link", tmp_path / "inbox"
    link.write_text("wifi\n")
    inbox.mkdir()
    cfg = s.agent_config(
        "truck-7", f'[[source]]\nkind = "directory"\npath = "{inbox}"\nclass = "bulk"\nsettle_seconds = 0.2\n',
        extra=f'link_file = "{link}"\n[[link]]\nname = "wifi"\n[[link]]\nname = "lte"\nmetered = true\n')
    s.start_agent(cfg)
    tmp = tmp_path / "cam.tmp"
    with open(tmp, "wb") as f:
        for _ in range(SIZE // (1 << 20)):
            f.write(os.urandom(1 << 20))
        f.write(os.urandom(SIZE % (1 << 20)))
    tmp.rename(inbox / "cam.bin")
    deadline = time.time() + 60
    while partial_size(s) < 20 * 1000 * 1000:
        assert time.time() < deadline, "the upload never started:\n" + s.log()[-2000:]
        assert "stored" not in s.log(), "finished before the link changed: make SIZE larger"
        time.sleep(0.01)
    link.write_text("lte\n")
    switched = time.time()
    last, last_change = partial_size(s), time.time()
    while time.time() - last_change < 1.5:
        now = partial_size(s)
        if now != last:
            last, last_change = now, time.time()
        time.sleep(0.01)
    paused_after = last_change - switched
    assert "stored" not in s.log(), "it did not pause"
    assert last < SIZE
    assert paused_after <= 1.0, f"still growing {paused_after:.2f} s after the link turned metered"
    held = last
    link.write_text("wifi\n")
    deadline = time.time() + 120
    # The server's log line (tracing's text format): stored ... name="…cam.bin" bytes=N resumed_from=M
    stored = r'stored .*?name="[^"]*cam[^"]*" bytes=(\d+) resumed_from=(\d+)'
    while (m := re.search(stored, s.log())) is None:
        assert time.time() < deadline, s.log()[-2000:]
        time.sleep(0.1)
    size, resumed = int(m.group(1)), int(m.group(2))
    assert size == SIZE
    # Resumed from what the server held at the pause: none of it resent.
    assert resumed == held, (resumed, held)
    print(f"paused {paused_after:.3f} s after the switch; resumed from {resumed} of {size} bytes")
