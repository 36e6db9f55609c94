//! Logs of the long-running commands (`convoy serve`, `convoy agent`)
//! through `tracing`: one event per line on stderr, as text for a person
//! or journald, or as one JSON object per line for a log pipeline. Every
//! event carries its fields (vehicle, peer, upload name, bytes,
//! durations) as fields, not only inside the message; the agent's events
//! also carry the fields of the span they run in (its vehicle).

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// `TIME LEVEL target: message key=value…`, one line per event.
    Text,
    /// One JSON object per line: ts, level, target, message and the fields.
    Json,
}

/// The logging options of `convoy serve` and `convoy agent`.
#[derive(clap::Args, Clone, Debug)]
pub struct LogOpts {
    /// Which events to log on stderr: error, warn, info, debug or trace,
    /// or a filter in RUST_LOG's syntax (`info,convoy_web=debug`). Without
    /// it, RUST_LOG; without that, info (warn for `serve --json`, whose
    /// events already go to stdout).
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// How each log line is written: text, or json (one object per line,
    /// for journald's or a log shipper's parsers).
    #[arg(long, value_enum, value_name = "FORMAT", env = "CONVOY_LOG_FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Default for LogOpts {
    /// Text, with RUST_LOG's filter if set: for `convoy perf --server`.
    fn default() -> Self {
        LogOpts {
            log_level: None,
            log_format: LogFormat::Text,
        }
    }
}

impl LogOpts {
    /// Installs the process's subscriber. `default` is the filter used
    /// when neither `--log-level` nor RUST_LOG says one.
    pub fn init(&self, default: &str) -> anyhow::Result<()> {
        let filter = match (&self.log_level, std::env::var("RUST_LOG")) {
            (Some(f), _) => {
                EnvFilter::try_new(f).map_err(|e| anyhow::anyhow!("--log-level {f:?}: {e}"))?
            }
            (None, Ok(f)) if !f.trim().is_empty() => {
                EnvFilter::try_new(&f).map_err(|e| anyhow::anyhow!("RUST_LOG={f:?}: {e}"))?
            }
            _ => EnvFilter::new(default),
        };
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false);
        // A second init in one process (never in `main`) keeps the first.
        match self.log_format {
            LogFormat::Text => {
                let _ = builder.try_init();
            }
            LogFormat::Json => {
                let installed = builder
                    .fmt_fields(JsonFields::new())
                    .event_format(JsonLine)
                    .try_init();
                JSON.store(installed.is_ok(), Ordering::Relaxed);
            }
        }
        Ok(())
    }
}

static JSON: AtomicBool = AtomicBool::new(false);

/// Whether stderr carries JSON lines, so an error at exit is logged as one.
pub fn json_installed() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// One JSON object per event with the fields at the top level: those of
/// the spans it runs in first (outermost first), then its own, so a
/// `vehicle` set on the agent's span is on every line it logs.
/// (tracing-subscriber's own JSON format nests span fields under `span`.)
struct JsonLine;

impl<S, N> FormatEvent<S, N> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut obj = Map::new();
        let mut ts = String::new();
        SystemTime.format_time(&mut Writer::new(&mut ts))?;
        obj.insert("ts".into(), Value::String(ts));
        let meta = event.metadata();
        obj.insert("level".into(), meta.level().as_str().into());
        obj.insert("target".into(), meta.target().into());
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                // JsonFields stored the span's fields as one JSON object.
                if let Some(f) = ext.get::<FormattedFields<N>>() {
                    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&f.fields) {
                        obj.extend(m);
                    }
                }
            }
        }
        event.record(&mut Fields(&mut obj));
        writeln!(writer, "{}", Value::Object(obj))
    }
}

/// Records an event's fields as JSON values of their own kind (numbers
/// stay numbers), anything else as its Debug text.
struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}
