"""Campaign windows end to end (issue 36), small: the bench's loopback run
with 3 triggers (real `convoy serve` and `convoy agent`)."""

from convoy_lab.fleet.campaigns import bench


def test_three_triggers_arrive_complete(tmp_path):
    doc = bench(tmp_path / "run", 3)
    assert doc["agent_exit"] == 0
    assert (doc["triggers"], doc["windows_stored"], doc["samples_expected"]) == (3, 3, 3 * 162)
    assert (doc["samples_missing"], doc["samples_outside_window"], doc["samples_duplicated"]) == (0, 0, 0)
