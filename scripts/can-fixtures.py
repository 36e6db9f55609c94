#!/usr/bin/env python3
"""Writes the CAN test data of convoy-agent with cantools (PyPI), so our
DBC decoder is checked against another implementation, not against itself.

    python3 -m venv /tmp/ct && /tmp/ct/bin/pip install cantools
    /tmp/ct/bin/python scripts/can-fixtures.py crates/convoy-agent/tests/data/can

Writes, into the directory given:
  vehicle.dbc       a small DBC: Intel and Motorola signals, signed ones,
                    factors and offsets, a float, a multiplexed message and
                    an extended (29-bit) id
  drive.log         candump -L lines of frames cantools encoded
  expected.jsonl    per frame, what cantools decodes from it (the oracle)
  bench100.dbc      100 messages of 4-8 signals each, for `convoy bench can`

The DBC text is written here and then loaded by cantools, which refuses
a file that is not valid; the frames are cantools' encodings of random
physical values, and the expected values its decodings of those frames.
"""
import json
import random
import sys
from pathlib import Path

import cantools

VEHICLE_DBC = """VERSION ""

NS_ :

BS_:

BU_: ECU GW

BO_ 256 Speed: 8 ECU
 SG_ VehicleSpeed : 0|16@1+ (0.01,0) [0|655.35] "km/h" GW
 SG_ LongAccel : 16|12@1- (0.01,0) [-20.48|20.47] "m/s^2" GW
 SG_ Moving : 28|1@1+ (1,0) [0|1] "" GW

BO_ 512 Engine: 8 ECU
 SG_ EngineSpeed : 7|16@0+ (0.25,0) [0|16383.75] "rpm" GW
 SG_ CoolantTemp : 23|8@0+ (1,-40) [-40|215] "degC" GW
 SG_ Torque : 31|13@0- (0.5,-10) [-2058|2037.5] "Nm" GW

BO_ 768 Battery: 8 ECU
 SG_ Voltage : 0|32@1+ (1,0) [0|1000] "V" GW
 SG_ Current : 39|16@0- (0.1,0) [-3276.8|3276.7] "A" GW

BO_ 1024 Mux: 8 ECU
 SG_ Page M : 0|8@1+ (1,0) [0|255] "" GW
 SG_ FuelLevel m0 : 8|8@1+ (0.5,0) [0|100] "%" GW
 SG_ Range m0 : 16|16@1+ (1,0) [0|2000] "km" GW
 SG_ AirTemp m1 : 8|10@1- (0.25,0) [-60|60] "degC" GW
 SG_ Humidity m1 : 18|7@1+ (1,0) [0|100] "%" GW

BO_ 2566848512 J1939Gear: 8 ECU
 SG_ Gear : 8|4@1- (1,0) [-1|7] "" GW
 SG_ Steering : 23|12@0- (0.1,0) [-204.8|204.7] "deg" GW

SIG_VALTYPE_ 768 Voltage : 1;
"""


def random_values(msg, rng):
    """Physical values inside each signal's range, as cantools wants."""
    values = {}
    if msg.is_multiplexed():
        page = rng.choice([0, 1])
        values["Page"] = page
        wanted = [s for s in msg.signals
                  if s.multiplexer_ids is None or page in s.multiplexer_ids]
    else:
        wanted = msg.signals
    for s in wanted:
        if s.name in values:
            continue
        if s.is_float:
            values[s.name] = rng.uniform(s.minimum, s.maximum)
            continue
        # A raw integer in range, so encoding is exact.
        lo = round((s.minimum - s.offset) / s.scale)
        hi = round((s.maximum - s.offset) / s.scale)
        raw = rng.randint(min(lo, hi), max(lo, hi))
        values[s.name] = raw * s.scale + s.offset
    return values


def candump_line(t, iface, frame_id, extended, data):
    ident = f"{frame_id:08X}" if extended else f"{frame_id:03X}"
    return f"({t:.6f}) {iface} {ident}#{data.hex().upper()}"


def write_vehicle(out, rng):
    (out / "vehicle.dbc").write_text(VEHICLE_DBC)
    db = cantools.database.load_file(out / "vehicle.dbc")
    lines, expected = [], []
    t = 1764000000.0
    for i in range(400):
        msg = db.messages[i % len(db.messages)]
        t += rng.uniform(0.0005, 0.02)
        data = msg.encode(random_values(msg, rng), strict=True)
        lines.append(candump_line(t, "can0", msg.frame_id, msg.is_extended_frame, data))
        decoded = msg.decode(data, decode_choices=False)
        expected.append({"t": round(t, 6), "message": msg.name,
                         "signals": {k: float(v) for k, v in decoded.items()}})
    (out / "drive.log").write_text("\n".join(lines) + "\n")
    with open(out / "expected.jsonl", "w") as f:
        for e in expected:
            f.write(json.dumps(e, sort_keys=True) + "\n")


def write_bench100(out, rng):
    """100 messages of up to 8 signals, both byte orders, some signed."""
    parts = ['VERSION ""', "", "NS_ :", "", "BS_:", "", "BU_: ECU", ""]
    for m in range(100):
        frame_id = 0x100 + m
        parts.append(f"BO_ {frame_id} Msg{m}: 8 ECU")
        byte = 0
        for s in range(rng.randint(4, 8)):
            # Whole bytes per signal, so Intel and Motorola signals never
            # overlap; a 12-bit one leaves half its second byte unused.
            size = rng.choice([8, 12, 16])
            nbytes = 1 if size == 8 else 2
            if byte + nbytes > 8:
                break
            motorola = rng.random() < 0.4
            sign = "-" if rng.random() < 0.3 else "+"
            # DBC names a Motorola signal by its most significant bit.
            start, order = (byte * 8 + 7, 0) if motorola else (byte * 8, 1)
            factor = rng.choice([1, 0.5, 0.1, 0.01])
            parts.append(f' SG_ S{m}_{s} : {start}|{size}@{order}{sign} ({factor},0) [0|0] "" ECU')
            byte += nbytes
        parts.append("")
    text = "\n".join(parts) + "\n"
    (out / "bench100.dbc").write_text(text)
    db = cantools.database.load_file(out / "bench100.dbc")
    assert len(db.messages) == 100, len(db.messages)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "crates/convoy-agent/tests/data/can")
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(36)
    write_vehicle(out, rng)
    write_bench100(out, rng)
    print(f"wrote {out}: vehicle.dbc, drive.log, expected.jsonl, bench100.dbc (cantools {cantools.__version__})")


if __name__ == "__main__":
    main()
