"""Data a request asked for is preserved (issue 36, item 4), with real
processes on loopback: telemetry waits in a small spool (its metered link
carries events only); an upload request marks a time range; more
telemetry overflows the quota and the overflow rule drops older segments
but none of the requested ones; `convoy agent status` shows the preserved
bytes; once a link request lets telemetry through, the request uploads
every one of them."""

import json
import random
import subprocess
import time

from convoy_lab.fleet import Service
from convoy_lab.fleet.requests import post_request, wait_control, wait_rows
from convoy_lab.runner import convoy_binary


def burst(agent, n: int = 50) -> None:
    t = time.time_ns()
    lines = [json.dumps({"t_ns": t + i, "path": "Vehicle.Speed", "value": random.random() * 100})
             for i in range(n)]
    agent.stdin.write(("\n".join(lines) + "\n").encode())
    agent.stdin.flush()


def feed(agent, seconds: float) -> None:
    end = time.time() + seconds
    while time.time() < end:
        burst(agent)
        time.sleep(0.1)


def telemetry(s: Service, cfg) -> dict:
    return [c for c in s.agent_status(cfg)["classes"] if c["class"] == "telemetry"][0]


def test_requested_data_outlives_the_overflow_rule(service):
    s, ops = service, service.token()
    cfg = s.agent_config("truck-7", '[[source]]\nkind = "stdin"\n',
                         extra='quota = "40KB"\n[[link]]\nname = "lte"\nmetered = true\nclasses = ["events"]\n')
    agent = s.start_agent(cfg, stdin=subprocess.PIPE)
    wait_control(s, 0)
    t0 = time.time_ns()
    feed(agent, 2.5)
    time.sleep(1.5)
    t1 = time.time_ns()
    assert telemetry(s, cfg)["queued"] >= 2, s.agent_status(cfg)
    code, up = post_request(s, ops, "truck-7", {"type": "upload", "from_ns": t0, "to_ns": t1,
                                                "priority": "telemetry"})
    assert code == 200
    uid = up["request"]["id"]
    wait_rows(s, ops, {uid}, "acked", 10)
    time.sleep(0.5)
    st = s.agent_status(cfg)
    kept, kept_bytes = st["preserved_segments"], st["preserved_bytes"]
    assert kept >= 2 and kept_bytes > 0, st
    text = subprocess.run([str(convoy_binary()), "agent", "status", "--config", str(cfg)],
                          capture_output=True, text=True).stdout
    assert f"preserved: {kept_bytes} bytes in {kept} segments" in text, text
    # Overflow: far more than the quota.
    feed(agent, 10)
    time.sleep(1.5)
    st = s.agent_status(cfg)
    assert telemetry(s, cfg)["dropped"] > 0, st
    assert (st["preserved_segments"], st["preserved_bytes"]) == (kept, kept_bytes), st
    code, link = post_request(s, ops, "truck-7", {"type": "link", "name": "lte",
                                                  "classes": ["events", "telemetry"]})
    assert code == 200
    got = wait_rows(s, ops, {uid, link["request"]["id"]}, "finished", 60)
    result = json.loads(got[uid]["result"])
    assert got[uid]["state"] == "done", got[uid]
    assert result["dropped"] == 0 and result["uploaded"] == result["segments"] == kept, result
    assert s.agent_status(cfg)["preserved_segments"] == 0
    agent.stdin.close()
