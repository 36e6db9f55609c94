//! The MQTT source against the real mosquitto (Debian's `mosquitto`
//! and `mosquitto-clients`, installed by scripts/setup.sh): a broker on a
//! free loopback port, messages published by `mosquitto_pub`, a broker
//! restart the source rides through.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use convoy_agent::mqtt::{Mapping, MqttSource};
use convoy_agent::sources::Tagged;
use convoy_telemetry::{SignalCatalog, Value};

/// Generous: the test machine is shared and loaded.
const WAIT: Duration = Duration::from_secs(60);

fn mosquitto() -> PathBuf {
    for p in ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"] {
        if Path::new(p).exists() {
            return p.into();
        }
    }
    panic!("mosquitto is not installed: run scripts/setup.sh (Debian's mosquitto and mosquitto-clients)");
}

/// A mosquitto process on 127.0.0.1:port, killed when dropped.
struct Broker(Child);

impl Broker {
    fn start(dir: &Path, port: u16) -> Broker {
        let conf = dir.join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!("listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"),
        )
        .unwrap();
        let child = Command::new(mosquitto())
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + WAIT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Broker(child)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn publish(port: u16, topic: &str, payload: &str) {
    let ok = Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-q",
            "1",
            "-t",
            topic,
            "-m",
            payload,
        ])
        .status()
        .expect("mosquitto_pub (Debian's mosquitto-clients) is not installed: run scripts/setup.sh")
        .success();
    assert!(ok, "mosquitto_pub to {topic}");
}

/// Publishes a probe until the source hands it over: the subscription
/// is then in place (messages before it are not delivered).
fn until_subscribed(port: u16, rx: &Receiver<Tagged>, probe: f64) {
    let deadline = Instant::now() + WAIT;
    loop {
        publish(port, "bms/soc", &probe.to_string());
        if let Ok((_, s)) = rx.recv_timeout(Duration::from_millis(500)) {
            if s.value == Value::Number(probe) {
                // Drain other copies of the probe.
                while rx.recv_timeout(Duration::from_millis(300)).is_ok() {}
                return;
            }
        }
        assert!(Instant::now() < deadline, "no subscription after {WAIT:?}");
    }
}

const MAPPING: &str = r#"
[[topic]]
filter = "ecu/+/drive"
time = "ts"
[topic.fields]
speed = "Vehicle.Speed"
"engine.rpm" = "Vehicle.Powertrain.CombustionEngine.Speed"
moving = "Vehicle.IsMoving"
[[topic]]
filter = "bms/soc"
[topic.fields]
"" = "Vehicle.Powertrain.TractionBattery.StateOfCharge.Current"
"#;

#[test]
fn samples_from_mosquitto_and_through_a_broker_restart() {
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let broker = Broker::start(dir.path(), port);
    let mapping = Mapping::parse(MAPPING, &SignalCatalog::default()).unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel(1024);
    let status = Arc::new(convoy_agent::status::Shared::default());
    let stop = Arc::new(AtomicBool::new(false));
    MqttSource {
        broker: format!("127.0.0.1:{port}"),
        client_id: "convoy-test".into(),
        mapping,
        class: convoy_agent::policy::Class::Telemetry,
    }
    .start(tx, status.clone(), stop.clone());
    until_subscribed(port, &rx, 50.5);

    publish(
        port,
        "ecu/7/drive",
        r#"{"speed": 42.5, "engine": {"rpm": 1800}, "moving": true, "ts": 1764000000.25}"#,
    );
    publish(port, "ecu/7/drive", "not json");
    publish(port, "ecu/7/drive", r#"{"unrelated": 1}"#);
    publish(port, "bms/soc", "81.5");
    let mut got = Vec::new();
    while got.len() < 4 {
        let (_, s) = rx.recv_timeout(WAIT).expect("samples from mosquitto");
        got.push(s);
    }
    let find = |p: &str| {
        got.iter()
            .find(|s| s.path == p)
            .unwrap_or_else(|| panic!("{p}: {got:?}"))
    };
    assert_eq!(find("Vehicle.Speed").value, Value::Number(42.5));
    assert_eq!(find("Vehicle.Speed").t_ns, 1_764_000_000_250_000_000);
    assert_eq!(
        find("Vehicle.Powertrain.CombustionEngine.Speed").value,
        Value::Number(1800.0)
    );
    assert_eq!(find("Vehicle.IsMoving").value, Value::Bool(true));
    assert_eq!(
        find("Vehicle.Powertrain.TractionBattery.StateOfCharge.Current").value,
        Value::Number(81.5)
    );
    let snap = status.snapshot();
    assert_eq!(snap.lines_rejected, 1, "{:?}", snap.last_rejection);
    assert!(snap.last_rejection.unwrap().contains("not JSON"));
    assert_eq!(snap.mqtt_unmapped, 1);

    // The broker goes away and comes back on the same port: the source
    // connects again and subscribes again by itself.
    drop(broker);
    let _broker = Broker::start(dir.path(), port);
    until_subscribed(port, &rx, 60.5);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}
