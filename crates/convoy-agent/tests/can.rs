//! The CAN source against cantools: frames cantools encoded
//! (`scripts/can-fixtures.py`) decode to what cantools decodes, and the
//! agent keeps every sample of a log with garbage lines in it, beside a
//! CAN source whose DBC does not parse.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use convoy_agent::can::{self, Decoder, Outcome};
use convoy_telemetry::{SegmentReader, Value};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/can")
        .join(name)
}

#[derive(serde::Deserialize)]
struct Expected {
    t: f64,
    message: String,
    signals: BTreeMap<String, f64>,
}

fn expected() -> Vec<Expected> {
    std::fs::read_to_string(data("expected.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn frames_decode_as_cantools_decodes_them() {
    let dec = Decoder::load(&data("vehicle.dbc")).unwrap();
    assert!(dec.skipped.is_empty(), "{:?}", dec.skipped);
    let log = std::fs::read_to_string(data("drive.log")).unwrap();
    let want = expected();
    assert_eq!(log.lines().count(), want.len());
    for (i, (line, e)) in log.lines().zip(&want).enumerate() {
        let frame = can::parse_line(line).unwrap();
        assert!(close(frame.t_ns as f64 / 1e9, e.t), "line {}", i + 1);
        let mut got = BTreeMap::new();
        let out = dec.decode(&frame, |s, v| {
            let m = dec.message_index(frame.id, frame.extended).unwrap();
            got.insert(dec.messages()[m].signals[s].name.clone(), v);
        });
        let Outcome::Decoded(m) = out else {
            panic!("line {}: {out:?}", i + 1)
        };
        assert_eq!(dec.messages()[m].name, e.message, "line {}", i + 1);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            e.signals.keys().collect::<Vec<_>>(),
            "line {}",
            i + 1
        );
        for (k, v) in &e.signals {
            assert!(
                close(got[k], *v),
                "line {} {k}: ours {} cantools {v}",
                i + 1,
                got[k]
            );
        }
    }
}

/// Every telemetry sample in the spool's segments.
fn spooled(spool: &Path) -> Vec<convoy_telemetry::Sample> {
    let mut out = Vec::new();
    let mut stack = vec![spool.join("segments")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(convoy_telemetry::SEGMENT_EXT) {
                let f = std::fs::File::open(&p).unwrap();
                out.extend(SegmentReader::new(f, 1 << 30).unwrap().samples().unwrap());
            }
        }
    }
    out
}

#[test]
fn the_agent_keeps_every_sample_past_garbage_lines_and_a_broken_dbc() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The cantools log with garbage between its lines.
    let garbage = [
        "garbage",
        "(1764000000.1) can0 100#0",
        "(1764000000.1) can0 XYZ#00",
        "(oops) can0 100#00",
        "\u{fffd}\u{fffd}",
    ];
    let mut log = String::new();
    for (i, line) in std::fs::read_to_string(data("drive.log"))
        .unwrap()
        .lines()
        .enumerate()
    {
        log.push_str(line);
        log.push('\n');
        if i % 80 == 0 {
            log.push_str(garbage[(i / 80) % garbage.len()]);
            log.push('\n');
        }
    }
    // A frame of an id the DBC lacks, and one too short for its message.
    log.push_str("(1764000100.0) can0 7FF#00\n(1764000100.0) can0 100#01\n");
    std::fs::write(d.join("drive.log"), &log).unwrap();
    let broken = std::fs::read_to_string(data("vehicle.dbc"))
        .unwrap()
        .replace("(0.01,0) [0|655.35]", "(0.01,0 [0|655.35]");
    std::fs::write(d.join("broken.dbc"), broken).unwrap();
    std::fs::copy(data("vehicle.dbc"), d.join("vehicle.dbc")).unwrap();
    convoy_net::write_keypair(&d.join("v.key"), &convoy_proto::crypto::Keypair::generate())
        .unwrap();
    let server = convoy_proto::crypto::Keypair::generate();
    let server_hex: String = server.public.iter().map(|b| format!("{b:02x}")).collect();
    // Nothing answers on this port: the samples stay in the spool.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        d.join("agent.toml"),
        format!(
            r#"
key = "v.key"
server = "127.0.0.1:{port}"
server_key = "{server_hex}"
spool = "spool"
[[source]]
kind = "can"
dbc = "broken.dbc"
log = "drive.log"
[[source]]
kind = "can"
dbc = "vehicle.dbc"
log = "drive.log"
unmapped = "private"
[source.signals]
VehicleSpeed = "Vehicle.Speed"
"Engine.EngineSpeed" = "Vehicle.Powertrain.CombustionEngine.Speed"
"#
        ),
    )
    .unwrap();
    let cfg = convoy_agent::config::Config::load(&d.join("agent.toml")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let agent = {
        let stop = stop.clone();
        std::thread::spawn(move || convoy_agent::run(cfg, stop, false))
    };
    let want = expected();
    let n_samples: usize = want.iter().map(|e| e.signals.len()).sum();
    let spool = d.join("spool");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        let s = convoy_agent::status::read(&spool);
        if let Some(s) =
            s.filter(|s| s.samples_in as usize == n_samples && s.can_frames_decoded == 400)
        {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the agent did not read the log in 120 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    stop.store(true, Ordering::Relaxed);
    agent.join().unwrap().unwrap();
    let err = status.last_error.unwrap_or_default();
    assert!(
        err.contains("CAN source not started")
            && err.contains("broken.dbc")
            && err.contains("not a valid DBC"),
        "{err}"
    );
    assert_eq!(
        status.lines_rejected,
        garbage.len() as u64,
        "{:?}",
        status.last_rejection
    );
    assert_eq!((status.can_frames_unknown, status.can_frames_short), (1, 1));

    let samples = spooled(&spool);
    assert_eq!(samples.len(), n_samples);
    let mut by_key: BTreeMap<(i64, String), f64> = BTreeMap::new();
    for s in &samples {
        let Value::Number(v) = s.value else {
            panic!("{s:?}")
        };
        by_key.insert((s.t_ns, s.path.clone()), v);
    }
    for e in &want {
        let t_ns = (e.t * 1e6).round() as i64 * 1000;
        for (sig, v) in &e.signals {
            let path = match (e.message.as_str(), sig.as_str()) {
                (_, "VehicleSpeed") => "Vehicle.Speed".to_string(),
                ("Engine", "EngineSpeed") => {
                    "Vehicle.Powertrain.CombustionEngine.Speed".to_string()
                }
                (m, s) => format!("Vehicle.Private.CAN.{m}.{s}"),
            };
            let got = by_key
                .get(&(t_ns, path.clone()))
                .unwrap_or_else(|| panic!("{path} at {t_ns} missing"));
            assert!(close(*got, *v), "{path}: {got} vs {v}");
        }
    }
}

/// Live SocketCAN needs the vcan module, which this machine's kernel
/// lacks; the test then says so in one line and passes.
#[test]
fn socketcan_frames_decode_when_the_kernel_has_vcan() {
    let iface = "cvyvcan36";
    let made = std::process::Command::new("ip")
        .args(["link", "add", "dev", iface, "type", "vcan"])
        .output();
    match made {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            println!(
                "skipped: no virtual CAN here ({})",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            println!("skipped: no virtual CAN here (ip: {e})");
            return;
        }
    }
    struct Link(&'static str);
    impl Drop for Link {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["link", "del", "dev", self.0])
                .status();
        }
    }
    let _link = Link(iface);
    assert!(std::process::Command::new("ip")
        .args(["link", "set", iface, "up"])
        .status()
        .unwrap()
        .success());
    let (tx, rx) = std::sync::mpsc::sync_channel(1024);
    let status = Arc::new(convoy_agent::status::Shared::default());
    let stop = Arc::new(AtomicBool::new(false));
    let src = can::CanSource {
        dbc: data("vehicle.dbc"),
        input: can::CanInput::Interface(iface.into()),
        signals: [("VehicleSpeed".to_string(), "Vehicle.Speed".to_string())].into(),
        unmapped: can::Unmapped::Drop,
        class: convoy_agent::policy::Class::Telemetry,
    };
    src.start(&Default::default(), tx, status.clone(), stop.clone())
        .unwrap();
    let sender = can::socketcan::CanSocket::open(iface, Duration::from_secs(1)).unwrap();
    // 30.00 km/h: 3000 = 0x0BB8, little endian.
    sender
        .send(0x100, false, &[0xB8, 0x0B, 0, 0, 0, 0, 0, 0])
        .unwrap();
    let (_, s) = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        (s.path.as_str(), s.value),
        ("Vehicle.Speed", Value::Number(30.0))
    );
    stop.store(true, Ordering::Relaxed);
}
