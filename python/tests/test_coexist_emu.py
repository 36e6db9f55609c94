"""The smart-ap and background experiments' short versions, end to end over
`convoy emu` with real kernel TCP, irtt and convoy. Need root,
/dev/net/tun, irtt and the convoy binary; otherwise skipped with the
reason. About two minutes."""

from __future__ import annotations

import shutil

import pytest

from convoy_lab.report import html as report
from convoy_lab.experiments import scheduled

pytestmark = pytest.mark.emu


@pytest.fixture(autouse=True)
def _irtt(emulator):
    if shutil.which("irtt") is None:
        pytest.skip("needs irtt (scripts/setup.sh installs it)")


def test_background_quick_puts_cubic_and_convoy_background_side_by_side(tmp_path, capsys):
    df = scheduled.run("background", quick=True, out=tmp_path, scale=None, only=None)
    by = {r["bulk"]: r for r in df.to_dict("records")}
    assert by["tcp-cubic"]["status"] == "ok" and by["convoy-background"]["status"] == "ok"
    # Cubic fills the 250-packet FIFO (300 ms at 10 Mbit/s); the scavenger
    # keeps the VoIP flow's added delay to a few milliseconds.
    assert by["tcp-cubic"]["voip_added_p50_ms"] > 100
    assert by["convoy-background"]["voip_added_p50_ms"] < 10
    assert by["convoy-background"]["bulk_mbit_s"] > 6
    scheduled.print_result("background", df)
    out = capsys.readouterr().out
    assert "convoy background against the targets" in out and "VoIP added one-way delay p95" in out
    page = report.write_report(tmp_path).read_text()
    assert 'id="background"' in page and "<img" in page


def test_smart_ap_quick_sap_law_empties_the_queue(tmp_path):
    df = scheduled.run("smart-ap", quick=True, out=tmp_path, scale=None, only=None)
    by = {r["policy"]: r for r in df.to_dict("records")}
    assert by["fifo-100"]["status"] == "ok" and by["sap-law"]["status"] == "ok"
    assert by["sap-law"]["queue_p95_ms"] < by["fifo-100"]["queue_p95_ms"]
    assert by["sap-law"]["tcp_mbit_s"] > 5
    assert by["fifo-100"]["game_pkts_all"] > 100
