//! Per-packet records and their compact CSV form.
//!
//! Every packet offered to a link gets one `enq` record, then exactly one of
//! `drop` (with its reason) or `dlv` (with its queueing delay), unless it is
//! still inside the link. Records are appended in processing order; `t_ns`
//! is the event's virtual time (sort by it for a timeline).
//!
//! ```text
//! t_ns,event,id,len,queue_delay_ns,reason
//! 1000000,enq,7,1500,,
//! 3400000,dlv,7,1500,1200000,
//! 3500000,drop,8,1500,,loss
//! ```

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use crate::error::{ParseErrorKind, TraceError};
use crate::time::{Dur, Time};
use crate::trace::numbered_lines;

/// Why the link dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The drop-tail limit was reached.
    QueueFull,
    /// The active queue policy dropped it.
    Aqm,
    /// The loss process lost it.
    Loss,
    /// The link was down under [`OutagePolicy::Drop`](crate::OutagePolicy::Drop).
    LinkDown,
}

impl DropReason {
    pub const ALL: [DropReason; 4] = [
        DropReason::QueueFull,
        DropReason::Aqm,
        DropReason::Loss,
        DropReason::LinkDown,
    ];

    /// The name used in records.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::Aqm => "aqm",
            DropReason::Loss => "loss",
            DropReason::LinkDown => "link_down",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DropReason {
    type Err = ();
    fn from_str(s: &str) -> Result<DropReason, ()> {
        DropReason::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or(())
    }
}

/// What happened to a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// Offered to the link.
    Enqueue,
    Drop(DropReason),
    /// Handed to the far end; `queue_delay` is from entering the queue to
    /// the last byte leaving the bottleneck.
    Deliver {
        queue_delay: Dur,
    },
}

/// One per-packet event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    pub t: Time,
    pub kind: RecordKind,
    pub id: u64,
    pub len: u32,
}

/// The CSV header line (without newline).
pub const CSV_HEADER: &str = "t_ns,event,id,len,queue_delay_ns,reason";

impl fmt::Display for Record {
    /// One CSV row, without newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (t, id, len) = (self.t.as_nanos(), self.id, self.len);
        match self.kind {
            RecordKind::Enqueue => write!(f, "{t},enq,{id},{len},,"),
            RecordKind::Drop(r) => write!(f, "{t},drop,{id},{len},,{r}"),
            RecordKind::Deliver { queue_delay } => {
                write!(f, "{t},dlv,{id},{len},{},", queue_delay.as_nanos())
            }
        }
    }
}

/// Writes records as CSV, header first.
pub struct RecordWriter<W: Write> {
    out: W,
}

impl<W: Write> RecordWriter<W> {
    pub fn new(mut out: W) -> io::Result<RecordWriter<W>> {
        writeln!(out, "{CSV_HEADER}")?;
        Ok(RecordWriter { out })
    }

    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        writeln!(self.out, "{record}")
    }

    pub fn write_all(&mut self, records: &[Record]) -> io::Result<()> {
        records.iter().try_for_each(|r| self.write(r))
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Records as CSV text.
pub fn records_to_csv(records: &[Record]) -> String {
    let mut out = String::with_capacity(32 * (records.len() + 1));
    out.push_str(CSV_HEADER);
    out.push('\n');
    for r in records {
        out.push_str(&r.to_string());
        out.push('\n');
    }
    out
}

/// Parses record CSV (as written by [`RecordWriter`]).
pub fn parse_records(text: &str, source_name: &str) -> Result<Vec<Record>, TraceError> {
    let err = |line, kind| TraceError::parse(source_name, line, kind);
    let mut lines = numbered_lines(text);
    match lines.next() {
        Some((_, h)) if h.trim() == CSV_HEADER => {}
        Some((n, h)) => {
            let kind = ParseErrorKind::UnknownColumn {
                found: h.to_owned(),
                expected: CSV_HEADER,
            };
            return Err(err(n, kind));
        }
        None => {
            let kind = ParseErrorKind::MissingHeader {
                example: CSV_HEADER,
            };
            return Err(err(1, kind));
        }
    }
    let mut out = Vec::new();
    for (n, line) in lines {
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        if f.len() != 6 {
            let kind = ParseErrorKind::FieldCount {
                expected: 6,
                found: f.len(),
            };
            return Err(err(n, kind));
        }
        let num = |i: usize, col: &str| -> Result<u64, TraceError> {
            f[i].parse::<u64>().map_err(|_| {
                let kind = ParseErrorKind::BadValue {
                    column: col.to_owned(),
                    found: f[i].to_owned(),
                    expected: "a non-negative integer",
                };
                err(n, kind)
            })
        };
        let t = Time::from_nanos(num(0, "t_ns")?);
        let id = num(2, "id")?;
        let len = u32::try_from(num(3, "len")?).map_err(|_| {
            let kind = ParseErrorKind::BadValue {
                column: "len".to_owned(),
                found: f[3].to_owned(),
                expected: "a length below 2^32",
            };
            err(n, kind)
        })?;
        let kind = match f[1] {
            "enq" => RecordKind::Enqueue,
            "dlv" => RecordKind::Deliver {
                queue_delay: Dur::from_nanos(num(4, "queue_delay_ns")?),
            },
            "drop" => RecordKind::Drop(f[5].parse().map_err(|_| {
                let kind = ParseErrorKind::BadValue {
                    column: "reason".to_owned(),
                    found: f[5].to_owned(),
                    expected: "one of queue_full, aqm, loss, link_down",
                };
                err(n, kind)
            })?),
            other => {
                let kind = ParseErrorKind::BadValue {
                    column: "event".to_owned(),
                    found: other.to_owned(),
                    expected: "one of enq, dlv, drop",
                };
                return Err(err(n, kind));
            }
        };
        out.push(Record { t, kind, id, len });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip_and_errors() {
        let recs = vec![
            Record {
                t: Time::from_nanos(5),
                kind: RecordKind::Enqueue,
                id: 1,
                len: 1500,
            },
            Record {
                t: Time::from_nanos(9),
                kind: RecordKind::Deliver {
                    queue_delay: Dur::from_nanos(4),
                },
                id: 1,
                len: 1500,
            },
            Record {
                t: Time::from_nanos(10),
                kind: RecordKind::Drop(DropReason::LinkDown),
                id: 2,
                len: 40,
            },
        ];
        let mut w = RecordWriter::new(Vec::new()).unwrap();
        w.write_all(&recs).unwrap();
        let text = String::from_utf8(w.into_inner()).unwrap();
        assert_eq!(text, records_to_csv(&recs));
        assert_eq!(
            text,
            "t_ns,event,id,len,queue_delay_ns,reason\n5,enq,1,1500,,\n9,dlv,1,1500,4,\n10,drop,2,40,,link_down\n"
        );
        assert_eq!(parse_records(&text, "r.csv").unwrap(), recs);
        let e = parse_records(
            "t_ns,event,id,len,queue_delay_ns,reason\n1,lost,1,1,,\n",
            "r.csv",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "r.csv:2: column \"event\": expected one of enq, dlv, drop, found \"lost\""
        );
        assert_eq!(parse_records("x\n", "r.csv").unwrap_err().line(), Some(1));
    }
}
