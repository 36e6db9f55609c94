//! `/metrics` in the Prometheus text exposition format (version 0.0.4),
//! which `promtool check metrics` validates and every Prometheus scrapes.
//!
//! Counters are kept as the server runs; gauges read from the catalog are
//! taken at scrape time, so every figure is one the server really has.
//! No figure carries a vehicle's name: a label per vehicle would grow with
//! the fleet and put names on a page that needs no token.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

/// What the web view counts as it serves.
#[derive(Default)]
pub struct HttpCounters {
    /// Responses by status code.
    responses: Mutex<BTreeMap<u16, u64>>,
    pub connections: AtomicU64,
    pub open: AtomicI64,
    pub tls_failed: AtomicU64,
}

impl HttpCounters {
    pub fn response(&self, status: u16) {
        if let Ok(mut m) = self.responses.lock() {
            *m.entry(status).or_insert(0) += 1;
        }
    }
}

/// Holds one open connection in `open` for as long as it lives.
pub struct OpenConnection<'a>(&'a HttpCounters);

impl<'a> OpenConnection<'a> {
    pub fn new(c: &'a HttpCounters) -> Self {
        c.connections.fetch_add(1, Ordering::Relaxed);
        c.open.fetch_add(1, Ordering::Relaxed);
        OpenConnection(c)
    }
}

impl Drop for OpenConnection<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the catalog said at scrape time.
pub struct CatalogFigures {
    pub registered: usize,
    pub revoked: usize,
    pub reporting_last_minute: usize,
    pub index_queue: i64,
    /// Seconds since the oldest segment waiting for the indexer was
    /// stored (0 when none waits).
    pub index_lag_seconds: f64,
}

/// A page of metrics being written: one HELP and TYPE per family, then
/// its samples. Other parts of the server (the transport, the indexer)
/// add their families through `WebConfig::extra_metrics`.
#[derive(Default)]
pub struct Exposition(String);

impl Exposition {
    /// The page written so far.
    pub fn into_text(self) -> String {
        self.0
    }

    /// `kind`: `counter` (name ends in `_total`) or `gauge`.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }
    /// `labels`: empty, or `{key="value",…}` with values escaped.
    pub fn sample(&mut self, name: &str, labels: &str, value: impl std::fmt::Display) {
        let _ = writeln!(self.0, "{name}{labels} {value}");
    }
    /// A family of one unlabelled sample.
    pub fn one(&mut self, name: &str, kind: &str, help: &str, value: impl std::fmt::Display) {
        self.family(name, kind, help);
        self.sample(name, "", value);
    }
}

/// Families that another part of the server writes into the page.
pub type ExtraMetrics = std::sync::Arc<dyn Fn(&mut Exposition) + Send + Sync>;

/// The whole exposition.
pub fn render(
    http: &HttpCounters,
    catalog_errors: u64,
    catalog: Option<&CatalogFigures>,
    extra: Option<&ExtraMetrics>,
) -> String {
    let mut p = Exposition(String::new());
    if let Some(f) = extra {
        f(&mut p);
    }
    p.family(
        "convoy_http_responses_total",
        "counter",
        "HTTP responses sent by the web view, by status code.",
    );
    if let Ok(m) = http.responses.lock() {
        for (code, n) in m.iter() {
            p.sample(
                "convoy_http_responses_total",
                &format!("{{code=\"{code}\"}}"),
                n,
            );
        }
    }
    let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
    p.one(
        "convoy_http_connections_total",
        "counter",
        "TCP connections accepted by the web view.",
        c(&http.connections),
    );
    p.one(
        "convoy_http_connections_open",
        "gauge",
        "Web view connections open now (live feeds included).",
        http.open.load(Ordering::Relaxed),
    );
    p.one(
        "convoy_http_tls_handshakes_failed_total",
        "counter",
        "TLS handshakes that failed or timed out.",
        c(&http.tls_failed),
    );
    p.one(
        "convoy_http_catalog_errors_total",
        "counter",
        "Catalog queries of the web view that failed.",
        catalog_errors,
    );
    p.one(
        "convoy_catalog_up",
        "gauge",
        "1 if the catalog answered this scrape, else 0.",
        u8::from(catalog.is_some()),
    );
    if let Some(f) = catalog {
        p.one(
            "convoy_vehicles_registered",
            "gauge",
            "Names in the registry (vehicles and operators), revoked included.",
            f.registered,
        );
        p.one(
            "convoy_vehicles_revoked",
            "gauge",
            "Revoked names in the registry.",
            f.revoked,
        );
        p.one(
            "convoy_vehicles_reporting_last_minute",
            "gauge",
            "Vehicles whose newest indexed sample is under 60 s old.",
            f.reporting_last_minute,
        );
        p.one(
            "convoy_index_queue_segments",
            "gauge",
            "Stored uploads waiting to be indexed.",
            f.index_queue,
        );
        p.one(
            "convoy_index_lag_seconds",
            "gauge",
            "Seconds since the oldest upload still waiting for the indexer was stored (0 when none waits).",
            f.index_lag_seconds,
        );
    }
    p.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_follows_its_help_and_type() {
        let h = HttpCounters::default();
        h.response(200);
        h.response(200);
        h.response(404);
        {
            let _open = OpenConnection::new(&h);
            assert!(render(&h, 0, None, None).contains("convoy_http_connections_open 1\n"));
        }
        let text = render(&h, 0, None, None);
        assert!(text.contains("convoy_http_responses_total{code=\"200\"} 2\n"));
        assert!(text.contains("convoy_http_responses_total{code=\"404\"} 1\n"));
        assert!(text.contains("convoy_http_connections_open 0\n"));
        assert!(text.contains("convoy_catalog_up 0\n"));
        assert!(!text.contains("convoy_index_queue_segments"));
        let f = CatalogFigures {
            registered: 2,
            revoked: 0,
            reporting_last_minute: 1,
            index_queue: 3,
            index_lag_seconds: 12.5,
        };
        let text = render(&h, 0, Some(&f), None);
        assert!(text.contains("convoy_index_queue_segments 3\n"), "{text}");
        assert!(text.contains("convoy_index_lag_seconds 12.5\n"), "{text}");
    }
}
