//! The agent's CAN source: frames from a candump log or a live SocketCAN
//! interface, decoded by a DBC file, each signal given a VSS name.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::Duration;

use convoy_telemetry::{Sample, SignalCatalog, Value};
use serde::Deserialize;

use super::candump::{self, Frame};
use super::dbc::{Decoder, Outcome};
use crate::policy::Class;
use crate::sources::Tagged;
use crate::status::Shared;

/// What becomes of DBC signals the mapping does not name.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Unmapped {
    /// Not kept: a DBC describes far more than most fleets store.
    #[default]
    Drop,
    /// Kept as `Vehicle.Private.CAN.MESSAGE.SIGNAL`.
    Private,
}

/// Where the frames come from.
#[derive(Clone, Debug)]
pub enum CanInput {
    /// A candump -L file, read once; samples keep the log's timestamps.
    Log(PathBuf),
    /// A SocketCAN interface; samples are stamped on arrival.
    Interface(String),
}

/// Per message, per signal: the VSS name it is stored under, if any.
pub struct SignalMap {
    paths: Vec<Vec<Option<String>>>,
}

impl SignalMap {
    /// `signals` maps `SIGNAL` or `MESSAGE.SIGNAL` (the longer form wins)
    /// to VSS names. A key naming no DBC signal and a VSS name the
    /// catalog refuses are errors, so a typo is found at start-up.
    pub fn new(
        decoder: &Decoder,
        signals: &BTreeMap<String, String>,
        unmapped: Unmapped,
        catalog: &SignalCatalog,
    ) -> Result<SignalMap, String> {
        for (key, vss) in signals {
            catalog
                .check(vss)
                .map_err(|e| format!("signals.{key}: {e}"))?;
            let found = decoder.messages().iter().any(|m| {
                m.signals.iter().any(|s| {
                    *key == s.name
                        || key.strip_prefix(&m.name).and_then(|r| r.strip_prefix('.'))
                            == Some(&s.name)
                })
            });
            if !found {
                return Err(format!("signals.{key}: no such signal in the DBC"));
            }
        }
        let paths = decoder
            .messages()
            .iter()
            .map(|m| {
                m.signals
                    .iter()
                    .map(|s| {
                        signals
                            .get(&format!("{}.{}", m.name, s.name))
                            .or_else(|| signals.get(&s.name))
                            .cloned()
                            .or_else(|| {
                                (unmapped == Unmapped::Private)
                                    .then(|| format!("Vehicle.Private.CAN.{}.{}", m.name, s.name))
                            })
                    })
                    .collect()
            })
            .collect();
        Ok(SignalMap { paths })
    }

    /// The VSS name of signal `signal` of message `message`.
    pub fn path(&self, message: usize, signal: usize) -> Option<&str> {
        self.paths[message][signal].as_deref()
    }
}

/// Counts kept on the reading thread and added to the shared status now
/// and then, so the hot loop touches no lock.
#[derive(Default)]
struct Counts {
    decoded: u64,
    unknown: u64,
    short: u64,
}

impl Counts {
    fn add(&mut self, o: Outcome) {
        match o {
            Outcome::Decoded(_) => self.decoded += 1,
            Outcome::Unknown => self.unknown += 1,
            Outcome::TooShort => self.short += 1,
        }
    }

    fn flush(&mut self, status: &Shared) {
        let c = std::mem::take(self);
        status.update(|s| {
            s.can_frames_decoded += c.decoded;
            s.can_frames_unknown += c.unknown;
            s.can_frames_short += c.short;
        });
    }
}

/// A configured CAN source.
pub struct CanSource {
    pub dbc: PathBuf,
    pub input: CanInput,
    pub signals: BTreeMap<String, String>,
    pub unmapped: Unmapped,
    pub class: Class,
}

impl CanSource {
    /// Loads the DBC and checks the mapping, then reads on a thread of
    /// its own. An error here (a DBC that does not parse, a bad mapping)
    /// stops this source only.
    pub fn start(
        self,
        catalog: &SignalCatalog,
        out: SyncSender<Tagged>,
        status: Arc<Shared>,
        stop: Arc<AtomicBool>,
    ) -> Result<(), String> {
        let decoder = Decoder::load(&self.dbc)?;
        for s in &decoder.skipped {
            tracing::warn!(
                target: "convoy::agent",
                dbc = %self.dbc.display(), signal = %s,
                "CAN signal left out"
            );
        }
        let map = SignalMap::new(&decoder, &self.signals, self.unmapped, catalog)
            .map_err(|e| format!("{}: {e}", self.dbc.display()))?;
        let class = self.class;
        match self.input {
            CanInput::Log(path) => {
                let file =
                    std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                crate::spawn(move || {
                    let name = path.display().to_string();
                    let reader = std::io::BufReader::with_capacity(1 << 16, file);
                    read_log(reader, &name, &decoder, &map, class, &out, &status, &stop);
                });
            }
            CanInput::Interface(iface) => {
                let sock = super::socketcan::CanSocket::open(&iface, Duration::from_millis(250))
                    .map_err(|e| format!("SocketCAN {iface}: {e}"))?;
                crate::spawn(move || {
                    let mut counts = Counts::default();
                    while !stop.load(Ordering::Relaxed) {
                        match sock.recv() {
                            Ok(Some(frame)) => {
                                if !emit(&frame, &decoder, &map, class, &out, &mut counts) {
                                    break;
                                }
                            }
                            Ok(None) => {}
                            Err(e) => {
                                status.note_error(&format!("SocketCAN {iface}: {e}"));
                                break;
                            }
                        }
                        if counts.decoded + counts.unknown + counts.short > 0 {
                            counts.flush(&status);
                        }
                    }
                    counts.flush(&status);
                });
            }
        }
        Ok(())
    }
}

/// Decodes one frame into samples; `false` once the agent stopped
/// taking them.
fn emit(
    frame: &Frame<'_>,
    decoder: &Decoder,
    map: &SignalMap,
    class: Class,
    out: &SyncSender<Tagged>,
    counts: &mut Counts,
) -> bool {
    let mut open = true;
    // Only a frame of a known message calls back, so `m` is then Some.
    let m = decoder.message_index(frame.id, frame.extended).unwrap_or(0);
    let outcome = decoder.decode(frame, |i, v| {
        if let (true, Some(path)) = (open, map.path(m, i)) {
            let s = Sample {
                t_ns: frame.t_ns,
                path: path.to_owned(),
                value: Value::Number(v),
            };
            open = out.send((class, s)).is_ok();
        }
    });
    counts.add(outcome);
    open
}

/// Reads a candump log to its end (or `stop`): each garbage line is
/// refused with its file and line number and the rest read on.
#[allow(clippy::too_many_arguments)]
pub fn read_log(
    mut reader: impl BufRead,
    name: &str,
    decoder: &Decoder,
    map: &SignalMap,
    class: Class,
    out: &SyncSender<Tagged>,
    status: &Shared,
    stop: &AtomicBool,
) {
    let mut counts = Counts::default();
    let mut buf = Vec::with_capacity(128);
    let mut line_no = 0u64;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                status.note_error(&format!("{name}: {e}"));
                break;
            }
        }
        line_no += 1;
        if line_no.is_multiple_of(4096) {
            counts.flush(status);
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let Ok(text) = std::str::from_utf8(line) else {
            status.reject(&format!("{name}:{line_no}: not a candump line: not UTF-8"));
            continue;
        };
        match candump::parse_line(text) {
            Ok(frame) => {
                if !emit(&frame, decoder, map, class, out, &mut counts) {
                    break;
                }
            }
            Err(e) => status.reject(&format!("{name}:{line_no}: not a candump line: {e}")),
        }
    }
    counts.flush(status);
}
