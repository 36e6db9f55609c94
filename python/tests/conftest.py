import os
from pathlib import Path

import pytest

from convoy_lab.fleet import Service
from convoy_lab.runner import ConvoyNotFound, convoy_binary

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_TRACES = REPO_ROOT.parent / "shared" / "traces"


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.fail(f"expected the shared traces at {SHARED_TRACES}")
    return SHARED_TRACES


@pytest.fixture
def service(tmp_path):
    """A fleet server on loopback with one registered vehicle, truck-7 (a
    test module may define its own)."""
    try:
        convoy_binary()
    except ConvoyNotFound as e:
        pytest.fail(str(e))
    with Service(tmp_path / "fleet", ["truck-7"]) as s:
        yield s


@pytest.fixture
def emulator():
    """Skips the test unless `convoy emu` can run here: root, /dev/net/tun
    and the convoy binary."""
    if os.geteuid() != 0 or not Path("/dev/net/tun").exists():
        pytest.skip("needs root and /dev/net/tun (convoy emu)")
    try:
        convoy_binary()
    except ConvoyNotFound as err:
        pytest.skip(str(err))
