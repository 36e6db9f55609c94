"""The fault campaign, small: three uploads under seeded faults over
`convoy emu`, each re-run until stored, checked byte for byte. Needs root
and /dev/net/tun (as `convoy emu` does); skipped otherwise."""

import os
from pathlib import Path

import pytest

from convoy_lab.experiments import faults
from convoy_lab.runner import ConvoyNotFound, convoy_binary


def _skip_reason():
    if os.geteuid() != 0:
        return "needs root (convoy emu, a tmpfs store)"
    if not Path("/dev/net/tun").exists():
        return "needs /dev/net/tun"
    try:
        convoy_binary()
    except ConvoyNotFound as e:
        return str(e)
    return None


def test_plans_are_seeded_and_cover_every_fault():
    seen = set()
    for i in range(200):
        size, chosen, link, timing = faults.plan(i, 1, quick=False)
        assert faults.plan(i, 1, quick=False) == (size, chosen, link, timing)
        assert 1 <= len(chosen) <= 2
        seen.update(chosen)
        if "outage" in chosen:
            assert 1.0 <= timing["outage_s"] <= 60.0
    assert seen == set(faults.FAULTS)


def test_compare_counts_lost_and_corrupted_bytes(tmp_path):
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_bytes(b"abcdef")
    assert faults._compare(src, dst) == (6, 0)
    dst.write_bytes(b"abXdef")
    assert faults._compare(src, dst) == (0, 1)
    dst.write_bytes(b"abc")
    assert faults._compare(src, dst) == (3, 0)


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
def test_three_uploads_under_faults_lose_nothing(tmp_path):
    result = faults.run_campaign(3, seed=3, quick=True, out=tmp_path)
    s = result["summary"]
    assert s["uploads"] == 3
    assert s["bytes_lost"] == 0 and s["bytes_corrupted"] == 0, result
    assert s["stored"] == 3
