from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_TRACES = REPO_ROOT.parent / "shared" / "traces"


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.fail(f"expected the shared traces at {SHARED_TRACES}")
    return SHARED_TRACES
