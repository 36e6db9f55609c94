"""Requests from the cloud to a vehicle (issue 36), with real processes on
loopback: the API refuses a vehicle's token and malformed requests and
queues nothing; a request for data the vehicle no longer has fails with
the reason; a request queued while the vehicle is away reaches it when
it is back; an upload request runs once a link request lets its class
through, and reports progress."""

import json
import subprocess
import time

from convoy_lab.fleet import Service, drive_lines
from convoy_lab.fleet.requests import post_request, wait_control, wait_rows
from convoy_lab.runner import convoy_binary


def telemetry_waiting(s: Service, cfg) -> int:
    return [c for c in s.agent_status(cfg)["classes"] if c["class"] == "telemetry"][0]["queued"]


def rows(s: Service, token: str) -> list[dict]:
    return s.api("/api/requests", token=token)["requests"]


def test_bad_requests_get_a_clear_error_and_queue_nothing(service):
    s, ops = service, service.token()
    code, doc = post_request(s, s.token("truck-7"), "truck-7", {"type": "status"})
    assert code == 403 and "operator's token: truck-7 is a vehicle" in doc["error"]
    code, doc = post_request(s, ops, "truck-7", {"type": "upload"})
    assert code == 400 and "names files or a time range" in doc["error"]
    code, doc = post_request(s, ops, "truck-7", {"type": "reboot"})
    assert code == 400 and "malformed request" in doc["error"]
    code, doc = post_request(s, ops, "nobody", {"type": "status"})
    assert code == 404 and "no vehicle named" in doc["error"]
    assert rows(s, ops) == []
    # The command line applies the same rule.
    p = subprocess.run([str(convoy_binary()), "fleet", "request", "truck-7", "--token", s.token("truck-7"),
                        "--key", str(s.key), "--dir", str(s.store), "status"], capture_output=True, text=True)
    assert p.returncode != 0 and "is a vehicle" in p.stderr
    assert rows(s, ops) == []


def test_requests_wait_for_an_offline_vehicle_and_missing_data_is_named(service, tmp_path):
    s, ops = service, service.token()
    # Queued while the vehicle is away.
    code, doc = post_request(s, ops, "truck-7", {"type": "upload", "files": ["2020-01-01/telemetry/000001.jsonl.zst"]})
    assert code == 200
    missing = doc["request"]["id"]
    p = subprocess.run([str(convoy_binary()), "fleet", "request", "truck-7", "--token", ops,
                        "--key", str(s.key), "--dir", str(s.store), "status"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    time.sleep(0.3)
    assert {r["state"] for r in rows(s, ops)} == {"queued"}
    cfg = s.agent_config("truck-7", f'[[source]]\nkind = "socket"\npath = "{tmp_path / "t.sock"}"\n')
    s.start_agent(cfg)
    wait_control(s, 0)
    got = wait_rows(s, ops, {r["id"] for r in rows(s, ops)}, "finished", 20)
    assert got[missing]["state"] == "failed"
    assert "no longer has the data" in got[missing]["error"] and "not in this vehicle's spool" in got[missing]["error"]
    status = [r for i, r in got.items() if i != missing][0]
    assert status["state"] == "done" and '"spool"' in status["result"]


def test_an_upload_request_runs_when_a_link_request_lets_its_class_through(service, tmp_path):
    s, ops = service, service.token()
    # A metered link that carries only events: telemetry waits in the spool.
    cfg = s.agent_config("truck-7", '[[source]]\nkind = "stdin"\n',
                         extra='[[link]]\nname = "lte"\nmetered = true\nclasses = ["events"]\n')
    agent = s.start_agent(cfg, stdin=subprocess.PIPE)
    t0 = time.time_ns()
    agent.stdin.write(drive_lines(5, time.time() - 5, 45.0).encode())
    agent.stdin.flush()
    wait_control(s, 0)
    deadline = time.time() + 20
    while telemetry_waiting(s, cfg) == 0 and time.time() < deadline:
        time.sleep(0.2)
    waiting = telemetry_waiting(s, cfg)
    assert waiting >= 1
    code, up = post_request(s, ops, "truck-7", {"type": "upload", "from_ns": t0 - 10**9, "to_ns": time.time_ns()})
    assert code == 200
    time.sleep(1.0)
    assert [r for r in rows(s, ops) if r["id"] == up["request"]["id"]][0]["state"] in ("acked", "running")
    assert telemetry_waiting(s, cfg) == waiting, "sent on a link that does not allow it"
    code, link = post_request(s, ops, "truck-7", {"type": "link", "name": "lte", "classes": ["events", "telemetry"]})
    assert code == 200
    got = wait_rows(s, ops, {up["request"]["id"], link["request"]["id"]}, "finished", 30)
    u = got[up["request"]["id"]]
    assert u["state"] == "done", u
    assert '"uploaded":' in u["result"] and u["progress"] and '"done":' in u["progress"]
    assert got[link["request"]["id"]]["state"] == "done"
    agent.stdin.close()


def test_a_collection_sends_the_latest_values_and_an_unknown_signal_fails(service):
    s, ops = service, service.token()
    cfg = s.agent_config("truck-7", '[[source]]\nkind = "stdin"\n')
    agent = s.start_agent(cfg, stdin=subprocess.PIPE)
    agent.stdin.write(drive_lines(3, time.time() - 3, 45.0).encode())
    agent.stdin.flush()
    wait_control(s, 0)
    code, bad = post_request(s, ops, "truck-7", {"type": "collect", "signals": ["Vehicle.Sped"],
                                                 "rate_hz": 5, "seconds": 1})
    assert code == 200
    code, ok = post_request(s, ops, "truck-7", {"type": "collect", "signals": ["Vehicle.Speed"],
                                                "rate_hz": 10, "seconds": 1})
    assert code == 200
    # Values read during the collection are what it samples.
    for i in range(40):
        agent.stdin.write(drive_lines(1, time.time(), 45.0 + i * 1e-4).encode())
        agent.stdin.flush()
        time.sleep(0.05)
    got = wait_rows(s, ops, {bad["request"]["id"], ok["request"]["id"]}, "finished", 20)
    b, o = got[bad["request"]["id"]], got[ok["request"]["id"]]
    assert b["state"] == "failed" and "Vehicle.Sped" in b["error"], b
    assert o["state"] == "done", o
    assert '"ticks":10' in o["result"], o["result"]
    assert 5 <= json.loads(o["result"])["samples"] <= 10, o["result"]
    agent.stdin.close()
