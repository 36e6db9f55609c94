"""Link rules with real processes: an agent on a metered link with a daily
budget spends at most one segment past it and sends no bulk file there,
then sends the held bulk file once the link in use is Wi-Fi. The lanes
upload many segments at once (a window of 64), so this checks that what
is in flight counts against the budget."""

import pytest

from convoy_lab.fleet.bench import budget
from convoy_lab.runner import ConvoyNotFound, convoy_binary


def test_a_metered_budget_is_overrun_by_at_most_one_segment(tmp_path):
    try:
        convoy_binary()
    except ConvoyNotFound as e:
        pytest.fail(str(e))
    r = budget(tmp_path, seconds=6)
    assert r["spent_bytes"] >= r["budget_bytes"], r  # 6 s of telemetry is more than the budget
    assert r["within_one_segment"], r
    assert r["bulk_files_over_metered"] == 0, r
