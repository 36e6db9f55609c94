//! The KUKSA source against a gRPC server that serves the published
//! `kuksa.val.v2` proto (the server half that the KUKSA project's Rust
//! SDK generates from it). No databroker can be installed from a package
//! registry, so the test's server plays its part: it checks the bearer
//! token and the signal paths as the databroker does, and streams what
//! the test feeds it.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use convoy_agent::kuksa::KuksaSource;
use convoy_agent::policy::Class;
use convoy_agent::sources::Tagged;
use convoy_agent::status::Shared;
use convoy_telemetry::Value;
use kuksa_rust_sdk::v2_proto as v2;
use kuksa_rust_sdk::v2_proto::val_server::{Val, ValServer};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// Generous: the test machine is shared and loaded.
const WAIT: Duration = Duration::from_secs(60);
const TOKEN: &str = "eyJ.test.jwt";

type Feed = mpsc::Sender<Result<v2::SubscribeResponse, Status>>;

/// What the broker saw, and a sender per accepted subscription.
#[derive(Default)]
struct Seen {
    buffer_sizes: Vec<u32>,
    feeds: Vec<Feed>,
    refused: Vec<String>,
}

struct Broker {
    known: HashSet<String>,
    seen: Arc<Mutex<Seen>>,
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn unimplemented<T>() -> Result<Response<T>, Status> {
    Err(Status::unimplemented("not served by the test broker"))
}

#[tonic::async_trait]
impl Val for Broker {
    type SubscribeStream = BoxStream<v2::SubscribeResponse>;
    type SubscribeByIdStream = BoxStream<v2::SubscribeByIdResponse>;
    type OpenProviderStreamStream = BoxStream<v2::OpenProviderStreamResponse>;

    async fn subscribe(
        &self,
        request: Request<v2::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        let auth = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut seen = self.seen.lock().unwrap();
        if auth.as_deref() != Some(&format!("Bearer {TOKEN}")) {
            seen.refused.push("unauthenticated".into());
            return Err(Status::unauthenticated("bearer token required"));
        }
        let r = request.into_inner();
        if let Some(p) = r.signal_paths.iter().find(|p| !self.known.contains(*p)) {
            seen.refused.push(p.clone());
            return Err(Status::not_found(format!("no signal {p}")));
        }
        seen.buffer_sizes.push(r.buffer_size);
        let (tx, rx) = mpsc::channel(16);
        seen.feeds.push(tx);
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }

    async fn get_value(
        &self,
        _: Request<v2::GetValueRequest>,
    ) -> Result<Response<v2::GetValueResponse>, Status> {
        unimplemented()
    }
    async fn get_values(
        &self,
        _: Request<v2::GetValuesRequest>,
    ) -> Result<Response<v2::GetValuesResponse>, Status> {
        unimplemented()
    }
    async fn subscribe_by_id(
        &self,
        _: Request<v2::SubscribeByIdRequest>,
    ) -> Result<Response<Self::SubscribeByIdStream>, Status> {
        unimplemented()
    }
    async fn actuate(
        &self,
        _: Request<v2::ActuateRequest>,
    ) -> Result<Response<v2::ActuateResponse>, Status> {
        unimplemented()
    }
    async fn actuate_stream(
        &self,
        _: Request<tonic::Streaming<v2::ActuateRequest>>,
    ) -> Result<Response<v2::ActuateResponse>, Status> {
        unimplemented()
    }
    async fn batch_actuate(
        &self,
        _: Request<v2::BatchActuateRequest>,
    ) -> Result<Response<v2::BatchActuateResponse>, Status> {
        unimplemented()
    }
    async fn list_metadata(
        &self,
        _: Request<v2::ListMetadataRequest>,
    ) -> Result<Response<v2::ListMetadataResponse>, Status> {
        unimplemented()
    }
    async fn publish_value(
        &self,
        _: Request<v2::PublishValueRequest>,
    ) -> Result<Response<v2::PublishValueResponse>, Status> {
        unimplemented()
    }
    async fn open_provider_stream(
        &self,
        _: Request<tonic::Streaming<v2::OpenProviderStreamRequest>>,
    ) -> Result<Response<Self::OpenProviderStreamStream>, Status> {
        unimplemented()
    }
    async fn get_server_info(
        &self,
        _: Request<v2::GetServerInfoRequest>,
    ) -> Result<Response<v2::GetServerInfoResponse>, Status> {
        unimplemented()
    }
}

/// A broker on its own runtime; dropping it shuts the server down,
/// which ends every subscription's stream.
struct Running {
    addr: SocketAddr,
    seen: Arc<Mutex<Seen>>,
    rt: Option<tokio::runtime::Runtime>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    fn start(port: u16) -> Running {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let broker = Broker {
            known: ["Vehicle.Speed", "Vehicle.IsMoving", "Vehicle.OBD.DTCList"]
                .into_iter()
                .map(String::from)
                .collect(),
            seen: seen.clone(),
        };
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        rt.spawn(
            tonic::transport::Server::builder()
                .add_service(ValServer::new(broker))
                .serve_with_incoming_shutdown(
                    tokio_stream::wrappers::TcpListenerStream::new(listener),
                    async {
                        let _ = stopped.await;
                    },
                ),
        );
        Running {
            addr,
            seen,
            rt: Some(rt),
            shutdown: Some(shutdown),
        }
    }

    /// Waits for the `n`th accepted subscription and returns its feed.
    fn subscription(&self, n: usize) -> Feed {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(f) = self.seen.lock().unwrap().feeds.get(n - 1) {
                return f.clone();
            }
            assert!(Instant::now() < deadline, "no subscription {n}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn send(&self, feed: &Feed, entries: Vec<(&str, Option<i64>, v2::value::TypedValue)>) {
        let r = v2::SubscribeResponse {
            entries: entries
                .into_iter()
                .map(|(p, secs, v)| {
                    (
                        p.to_string(),
                        v2::Datapoint {
                            timestamp: secs.map(|seconds| prost_types::Timestamp {
                                seconds,
                                nanos: 500_000_000,
                            }),
                            value: Some(v2::Value {
                                typed_value: Some(v),
                            }),
                        },
                    )
                })
                .collect(),
        };
        let feed = feed.clone();
        self.rt
            .as_ref()
            .unwrap()
            .block_on(async move { feed.send(Ok(r)).await })
            .unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        // Ends the streams the server still holds.
        self.seen.lock().unwrap().feeds.clear();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(5));
        }
    }
}

fn source(addr: SocketAddr, signals: &[&str], token: Option<&str>) -> KuksaSource {
    KuksaSource {
        databroker: format!("http://{addr}"),
        signals: signals.iter().map(|s| s.to_string()).collect(),
        buffer: 32,
        token: token.map(String::from),
        class: Class::Telemetry,
    }
}

fn started(
    src: KuksaSource,
) -> (
    std::sync::mpsc::Receiver<Tagged>,
    Arc<Shared>,
    Arc<AtomicBool>,
) {
    let (tx, rx) = std::sync::mpsc::sync_channel(1024);
    let status = Arc::new(Shared::default());
    let stop = Arc::new(AtomicBool::new(false));
    src.start(tx, status.clone(), stop.clone());
    (rx, status, stop)
}

#[test]
fn datapoints_arrive_as_samples_and_survive_a_broker_restart() {
    use v2::value::TypedValue as T;
    let broker = Running::start(0);
    let addr = broker.addr;
    let (rx, status, stop) = started(source(
        addr,
        &["Vehicle.Speed", "Vehicle.IsMoving", "Vehicle.OBD.DTCList"],
        Some(TOKEN),
    ));
    let feed = broker.subscription(1);
    assert_eq!(broker.seen.lock().unwrap().buffer_sizes, vec![32]);
    broker.send(
        &feed,
        vec![
            ("Vehicle.Speed", Some(1_764_000_001), T::Float(42.5)),
            ("Vehicle.IsMoving", Some(1_764_000_000), T::Bool(true)),
        ],
    );
    broker.send(
        &feed,
        vec![(
            "Vehicle.OBD.DTCList",
            None,
            T::StringArray(v2::StringArray {
                values: vec!["P0300".into()],
            }),
        )],
    );
    let got: Vec<Tagged> = (0..3)
        .map(|_| rx.recv_timeout(WAIT).expect("a sample from the broker"))
        .collect();
    assert!(got.iter().all(|(c, _)| *c == Class::Telemetry));
    assert_eq!(
        (got[0].1.path.as_str(), got[0].1.t_ns, &got[0].1.value),
        (
            "Vehicle.IsMoving",
            1_764_000_000_500_000_000,
            &Value::Bool(true)
        )
    );
    assert_eq!(
        (got[1].1.path.as_str(), &got[1].1.value),
        ("Vehicle.Speed", &Value::Number(42.5))
    );
    assert_eq!(got[2].1.value, Value::Text(r#"["P0300"]"#.into()));

    // The broker goes away and comes back on the same port: the source
    // dials again and subscribes anew.
    drop(broker);
    let broker = Running::start(addr.port());
    let feed = broker.subscription(1);
    broker.send(
        &feed,
        vec![("Vehicle.Speed", Some(1_764_000_100), T::Double(7.0))],
    );
    let (_, s) = rx.recv_timeout(WAIT).expect("a sample after the restart");
    assert_eq!(
        (s.path.as_str(), &s.value),
        ("Vehicle.Speed", &Value::Number(7.0))
    );
    let snap = status.snapshot();
    assert_eq!(snap.kuksa_updates, 3);
    assert!(
        snap.last_error.as_deref().unwrap_or("").contains("KUKSA"),
        "the outage is reported: {:?}",
        snap.last_error
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[test]
fn a_refused_subscription_is_reported_with_the_brokers_reason() {
    let broker = Running::start(0);
    let deadline = Instant::now() + WAIT;
    for (src, reason) in [
        (
            source(broker.addr, &["Vehicle.Speed"], Some("wrong")),
            "Unauthenticated",
        ),
        (
            source(broker.addr, &["Vehicle.Speed"], None),
            "Unauthenticated",
        ),
        (
            // In convoy's catalog but not in this broker's.
            source(broker.addr, &["Vehicle.TraveledDistance"], Some(TOKEN)),
            "NotFound",
        ),
    ] {
        let (rx, status, stop) = started(src);
        loop {
            if let Some(e) = status.snapshot().last_error {
                assert!(e.contains(reason), "{reason}: {e}");
                break;
            }
            assert!(Instant::now() < deadline, "no error for {reason}");
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    }
    let refused = broker.seen.lock().unwrap().refused.clone();
    assert!(
        refused.iter().filter(|r| *r == "unauthenticated").count() >= 2
            && refused.iter().any(|r| r == "Vehicle.TraveledDistance"),
        "{refused:?}"
    );
}

#[test]
fn no_broker_is_an_error_that_names_the_address() {
    // A port nothing listens on.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (_rx, status, stop) = started(source(addr, &["Vehicle.Speed"], None));
    let deadline = Instant::now() + WAIT;
    let e = loop {
        if let Some(e) = status.snapshot().last_error {
            break e;
        }
        assert!(Instant::now() < deadline, "no error without a broker");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        e.contains(&addr.to_string()) && e.contains("retrying"),
        "{e}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}
