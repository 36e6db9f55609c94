//! convoy's time-series trace: a CSV of intervals, each carrying capacity,
//! one-way delay, loss-model parameters and up/down (docs/TRACES.md).
//!
//! Values are converted exactly (decimal text to integer nanoseconds and
//! bit/s) so a hand-written trace means the same thing on every machine.

use std::path::Path;

use crate::error::{ConfigError, ParseErrorKind, TraceError};
use crate::loss::{GeParams, LossParams};
use crate::rng::Prob;
use crate::time::{Dur, Time};
use crate::trace::decimal::{format_scaled, parse_scaled};
use crate::trace::numbered_lines;

/// One interval of a series trace; it lasts until the next row's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesRow {
    /// Offset of the interval's start from the trace's start.
    pub start: Dur,
    /// Capacity in bit/s (0 when the trace has no rate column).
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: Dur,
    pub loss: LossParams,
    /// False during a coverage gap or handover.
    pub up: bool,
}

impl Default for SeriesRow {
    fn default() -> SeriesRow {
        SeriesRow {
            start: Dur::ZERO,
            rate_bps: 0,
            delay: Dur::ZERO,
            loss: LossParams::None,
            up: true,
        }
    }
}

/// A validated time-series trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesTrace {
    rows: Vec<SeriesRow>,
    has_rate: bool,
    /// `None`: the last row holds forever. `Some(p)`: the trace repeats
    /// every `p`, the last row lasting until `p`.
    repeat: Option<Dur>,
    source: String,
}

const COLUMNS: &str = "start_<unit>, rate_<unit>, delay_<unit>, loss_p, ge_p_gb, ge_p_bg, ge_loss_good, ge_loss_bad, up";
const TIME_UNITS: &str = "s, ms, us, ns";
const RATE_UNITS: &str = "bps, kbps, mbps, gbps";
const HEADER_EXAMPLE: &str = "start_ms,rate_kbps,delay_ms,loss_p,up";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Start(u32),
    Rate(u32),
    Delay(u32),
    LossP,
    GePgb,
    GePbg,
    GeLossGood,
    GeLossBad,
    Up,
}

impl Column {
    fn slot(self) -> usize {
        match self {
            Column::Start(_) => 0,
            Column::Rate(_) => 1,
            Column::Delay(_) => 2,
            Column::LossP => 3,
            Column::GePgb => 4,
            Column::GePbg => 5,
            Column::GeLossGood => 6,
            Column::GeLossBad => 7,
            Column::Up => 8,
        }
    }
}

fn time_scale(unit: &str) -> Option<u32> {
    match unit {
        "s" => Some(9),
        "ms" => Some(6),
        "us" => Some(3),
        "ns" => Some(0),
        _ => None,
    }
}

fn rate_scale(unit: &str) -> Option<u32> {
    match unit {
        "bps" => Some(0),
        "kbps" => Some(3),
        "mbps" => Some(6),
        "gbps" => Some(9),
        _ => None,
    }
}

fn parse_column(name: &str) -> Result<Column, ParseErrorKind> {
    let fixed = match name {
        "loss_p" => Some(Column::LossP),
        "ge_p_gb" => Some(Column::GePgb),
        "ge_p_bg" => Some(Column::GePbg),
        "ge_loss_good" => Some(Column::GeLossGood),
        "ge_loss_bad" => Some(Column::GeLossBad),
        "up" => Some(Column::Up),
        _ => None,
    };
    if let Some(c) = fixed {
        return Ok(c);
    }
    /// A quantity with a unit suffix: stem, unit → scale, units, column.
    type Family = (
        &'static str,
        fn(&str) -> Option<u32>,
        &'static str,
        fn(u32) -> Column,
    );
    let families: [Family; 3] = [
        ("start", time_scale, TIME_UNITS, Column::Start),
        ("rate", rate_scale, RATE_UNITS, Column::Rate),
        ("delay", time_scale, TIME_UNITS, Column::Delay),
    ];
    for (stem, scale, expected, make) in families {
        if name == stem || name.starts_with(&format!("{stem}_")) {
            let unit = name.get(stem.len() + 1..).unwrap_or("");
            return scale(unit)
                .map(make)
                .ok_or_else(|| ParseErrorKind::UnknownUnit {
                    column: name.to_owned(),
                    found: unit.to_owned(),
                    expected,
                });
        }
    }
    Err(ParseErrorKind::UnknownColumn {
        found: name.to_owned(),
        expected: COLUMNS,
    })
}

fn bad(column: &str, found: &str, expected: &'static str) -> ParseErrorKind {
    ParseErrorKind::BadValue {
        column: column.to_owned(),
        found: found.to_owned(),
        expected,
    }
}

fn parse_prob(column: &str, cell: &str) -> Result<Prob, ParseErrorKind> {
    const EXPECTED: &str = "a probability between 0 and 1 (not a percentage)";
    let p: f64 = cell.parse().map_err(|_| bad(column, cell, EXPECTED))?;
    Prob::new(p, "probability").map_err(|_| bad(column, cell, EXPECTED))
}

fn parse_up(column: &str, cell: &str) -> Result<bool, ParseErrorKind> {
    match cell {
        "1" | "1.0" | "true" | "True" | "TRUE" => Ok(true),
        "0" | "0.0" | "false" | "False" | "FALSE" => Ok(false),
        _ => Err(bad(column, cell, "1 or 0 (or true/false)")),
    }
}

impl SeriesTrace {
    /// Reads and validates a series trace file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<SeriesTrace, TraceError> {
        let path = path.as_ref();
        let text = super::read_to_string(path)?;
        SeriesTrace::parse(&text, &path.display().to_string())
    }

    /// Parses series text; `source_name` is used in error messages.
    pub fn parse(text: &str, source_name: &str) -> Result<SeriesTrace, TraceError> {
        let err = |line, kind| TraceError::parse(source_name, line, kind);
        let mut header: Option<(usize, Vec<(Column, String)>)> = None;
        let mut rows: Vec<SeriesRow> = Vec::new();
        let mut last_line = 1;
        for (line_no, raw) in numbered_lines(text) {
            last_line = line_no;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split(',').map(str::trim).collect();
            let Some((_, columns)) = &header else {
                let mut columns: Vec<(Column, String)> = Vec::with_capacity(fields.len());
                for name in &fields {
                    let col = parse_column(name).map_err(|k| err(line_no, k))?;
                    if columns.iter().any(|(c, _)| c.slot() == col.slot()) {
                        let kind = ParseErrorKind::DuplicateColumn {
                            column: (*name).to_owned(),
                        };
                        return Err(err(line_no, kind));
                    }
                    columns.push((col, (*name).to_owned()));
                }
                if !columns.iter().any(|(c, _)| matches!(c, Column::Start(_))) {
                    let kind = ParseErrorKind::MissingColumn {
                        expected: "start_<unit> (e.g. start_ms)",
                    };
                    return Err(err(line_no, kind));
                }
                header = Some((line_no, columns));
                continue;
            };
            if fields.len() != columns.len() {
                let kind = ParseErrorKind::FieldCount {
                    expected: columns.len(),
                    found: fields.len(),
                };
                return Err(err(line_no, kind));
            }
            let row = parse_row(columns, &fields).map_err(|k| err(line_no, k))?;
            if let Some(prev) = rows.last() {
                if row.start <= prev.start {
                    let start_name = &columns.iter().find(|(c, _)| c.slot() == 0).unwrap().1;
                    let kind = ParseErrorKind::NotIncreasing {
                        column: start_name.clone(),
                        previous: format!("{} ns", prev.start.as_nanos()),
                        found: format!("{} ns", row.start.as_nanos()),
                    };
                    return Err(err(line_no, kind));
                }
            } else if row.start != Dur::ZERO {
                let kind = ParseErrorKind::FirstStartNotZero {
                    found: format!("{} ns", row.start.as_nanos()),
                };
                return Err(err(line_no, kind));
            }
            rows.push(row);
        }
        let Some((header_line, columns)) = header else {
            let kind = ParseErrorKind::MissingHeader {
                example: HEADER_EXAMPLE,
            };
            return Err(err(last_line, kind));
        };
        if rows.is_empty() {
            return Err(err(header_line, ParseErrorKind::NoRows));
        }
        Ok(SeriesTrace {
            rows,
            has_rate: columns.iter().any(|(c, _)| matches!(c, Column::Rate(_))),
            repeat: None,
            source: source_name.to_owned(),
        })
    }

    /// Builds a trace from rows (e.g. produced by a channel model). The first
    /// row must start at 0 and starts must increase; an error names line
    /// `row index + 2`, as in the CSV form (`to_csv`) the rows are checked in.
    pub fn from_rows(rows: Vec<SeriesRow>, has_rate: bool) -> Result<SeriesTrace, TraceError> {
        let trace = SeriesTrace {
            rows,
            has_rate,
            repeat: None,
            source: "<rows>".to_owned(),
        };
        // One validation path: what we write must parse back identically.
        let parsed = SeriesTrace::parse(&trace.to_csv(), "<rows>")?;
        Ok(SeriesTrace { has_rate, ..parsed })
    }

    /// Makes the trace repeat every `period` instead of holding its last row.
    pub fn with_repeat(mut self, period: Dur) -> Result<SeriesTrace, ConfigError> {
        let last_start = self.rows[self.rows.len() - 1].start;
        if period <= last_start {
            return Err(ConfigError::RepeatPeriod {
                period_ns: period.as_nanos(),
                last_start_ns: last_start.as_nanos(),
            });
        }
        self.repeat = Some(period);
        Ok(self)
    }

    pub fn rows(&self) -> &[SeriesRow] {
        &self.rows
    }
    /// The same trace replayed from `offset` into it, shifted to start at
    /// time 0. A repeating trace wraps around (its rows are rotated and it
    /// keeps its period); a trace whose last row holds forever starts with
    /// the row in force at `offset`.
    pub fn starting_at(&self, offset: Dur) -> SeriesTrace {
        let off = match self.repeat {
            Some(p) => offset.as_nanos() % p.as_nanos(),
            None => offset.as_nanos(),
        };
        if off == 0 {
            return self.clone();
        }
        let first = self.rows.partition_point(|r| r.start.as_nanos() <= off) - 1;
        let shift = |r: &SeriesRow, start: u64| SeriesRow {
            start: Dur::from_nanos(start),
            ..*r
        };
        let mut rows = vec![shift(&self.rows[first], 0)];
        rows.extend(
            self.rows[first + 1..]
                .iter()
                .map(|r| shift(r, r.start.as_nanos() - off)),
        );
        if let Some(p) = self.repeat {
            let p = p.as_nanos();
            // The rows before the offset come round again after the end of
            // the period; the one in force at the offset resumes after them.
            rows.extend(
                self.rows[..=first]
                    .iter()
                    .map(|r| shift(r, r.start.as_nanos() + p - off)),
            );
            if rows.last().is_some_and(|r| r.start.as_nanos() >= p) {
                rows.pop();
            }
        }
        SeriesTrace {
            rows,
            has_rate: self.has_rate,
            repeat: self.repeat,
            source: format!("{} from {} ns", self.source, off),
        }
    }

    /// Whether the trace carries capacity (a `rate_<unit>` column).
    pub fn has_rate(&self) -> bool {
        self.has_rate
    }

    /// The repeat period, if the trace repeats.
    pub fn repeat(&self) -> Option<Dur> {
        self.repeat
    }

    /// Where the trace came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The row in force at `t` and the time that row stops applying
    /// (`Time::MAX` if never). `hint` caches the last row found, making the
    /// usual forward-moving lookups O(1).
    pub(crate) fn locate(&self, t: Time, hint: &mut usize) -> (usize, Time) {
        let n = self.rows.len();
        let t_ns = t.as_nanos();
        let (cycle_start, offset, period_end) = match self.repeat {
            None => (0, t_ns, None),
            Some(p) => {
                let p = p.as_nanos();
                (t_ns - t_ns % p, t_ns % p, Some(p))
            }
        };
        let starts_at = |i: usize| self.rows[i].start.as_nanos();
        let fits = |i: usize| starts_at(i) <= offset && (i + 1 == n || offset < starts_at(i + 1));
        let i = if *hint < n && fits(*hint) {
            *hint
        } else if *hint + 1 < n && fits(*hint + 1) {
            *hint + 1
        } else {
            self.rows.partition_point(|r| r.start.as_nanos() <= offset) - 1
        };
        *hint = i;
        let end = if i + 1 < n {
            Time::from_nanos(cycle_start.saturating_add(starts_at(i + 1)))
        } else {
            match period_end {
                None => Time::MAX,
                Some(p) => Time::from_nanos(cycle_start.saturating_add(p)),
            }
        };
        (i, end)
    }

    /// The same link at `factor` times its capacity: every row's rate
    /// scaled, its times, delays, losses and outages kept. `None` if the
    /// trace has no rate column or `factor` is not a positive finite number.
    pub fn scaled(&self, factor: f64) -> Option<SeriesTrace> {
        if !(self.has_rate && factor.is_finite() && factor > 0.0) {
            return None;
        }
        let mut out = self.clone();
        for r in &mut out.rows {
            r.rate_bps = (r.rate_bps as f64 * factor).round() as u64;
        }
        out.source = format!("{} scaled by {factor}", self.source);
        Some(out)
    }

    /// The row in force at `t`.
    pub fn row_at(&self, t: Time) -> &SeriesRow {
        let mut hint = 0;
        &self.rows[self.locate(t, &mut hint).0]
    }

    /// The trace as CSV text in the documented format (exact: parsing it
    /// back gives the same rows).
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        out.push_str("start_ms,");
        if self.has_rate {
            out.push_str("rate_kbps,");
        }
        out.push_str("delay_ms,loss_p,ge_p_gb,ge_p_bg,ge_loss_good,ge_loss_bad,up\n");
        for r in &self.rows {
            out.push_str(&format_scaled(r.start.as_nanos(), 6));
            out.push(',');
            if self.has_rate {
                out.push_str(&format_scaled(r.rate_bps, 3));
                out.push(',');
            }
            out.push_str(&format_scaled(r.delay.as_nanos(), 6));
            match r.loss {
                LossParams::None => out.push_str(",0,,,,"),
                LossParams::Bernoulli(p) => out.push_str(&format!(",{},,,,", p.as_f64())),
                LossParams::GilbertElliott(g) => out.push_str(&format!(
                    ",,{},{},{},{}",
                    g.p_gb.as_f64(),
                    g.p_bg.as_f64(),
                    g.loss_good.as_f64(),
                    g.loss_bad.as_f64()
                )),
            }
            out.push_str(if r.up { ",1\n" } else { ",0\n" });
        }
        out
    }
}

fn parse_row(columns: &[(Column, String)], fields: &[&str]) -> Result<SeriesRow, ParseErrorKind> {
    let mut row = SeriesRow::default();
    let mut loss_p: Option<Prob> = None;
    let mut ge: [Option<Prob>; 4] = [None; 4];
    let mut ge_names: [&str; 4] = ["ge_p_gb", "ge_p_bg", "ge_loss_good", "ge_loss_bad"];
    for ((col, name), &cell) in columns.iter().zip(fields) {
        let empty = cell.is_empty();
        match *col {
            Column::Start(scale) => {
                row.start = Dur::from_nanos(
                    parse_scaled(cell, scale)
                        .ok_or_else(|| bad(name, cell, "a non-negative time, e.g. 1500 or 2.5"))?,
                );
            }
            Column::Rate(scale) => {
                row.rate_bps = parse_scaled(cell, scale)
                    .ok_or_else(|| bad(name, cell, "a non-negative rate, e.g. 2000 or 1.5"))?;
            }
            Column::Delay(scale) if !empty => {
                row.delay = Dur::from_nanos(
                    parse_scaled(cell, scale)
                        .ok_or_else(|| bad(name, cell, "a non-negative delay, or empty for 0"))?,
                );
            }
            Column::LossP if !empty => loss_p = Some(parse_prob(name, cell)?),
            Column::GePgb | Column::GePbg | Column::GeLossGood | Column::GeLossBad if !empty => {
                let k = col.slot() - Column::GePgb.slot();
                ge[k] = Some(parse_prob(name, cell)?);
                ge_names[k] = name;
            }
            Column::Up if !empty => row.up = parse_up(name, cell)?,
            _ => {}
        }
    }
    row.loss = match ge {
        [None, None, None, None] => match loss_p {
            Some(p) if !p.is_zero() => LossParams::Bernoulli(p),
            _ => LossParams::None,
        },
        [Some(p_gb), Some(p_bg), loss_good, loss_bad] => {
            if loss_p.is_some_and(|p| !p.is_zero()) {
                return Err(bad(
                    "loss_p",
                    "non-zero",
                    "empty or 0 in a row that uses Gilbert-Elliott (ge_*)",
                ));
            }
            LossParams::GilbertElliott(GeParams {
                p_gb,
                p_bg,
                loss_good: loss_good.unwrap_or(Prob::ZERO),
                loss_bad: loss_bad.unwrap_or(Prob::ONE),
            })
        }
        [p_gb, _, _, _] => {
            let missing = if p_gb.is_none() { 0 } else { 1 };
            return Err(bad(
                ge_names[missing],
                "",
                "a probability: a Gilbert-Elliott row needs both ge_p_gb and ge_p_bg",
            ));
        }
    };
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SeriesTrace, TraceError> {
        SeriesTrace::parse(text, "s.csv")
    }

    #[test]
    fn parses_units_defaults_and_comments() {
        let t = parse(
            "# a comment\n\nstart_s, rate_mbps ,delay_us,loss_p,ge_p_gb,ge_p_bg,up # trailing\n\
             0,1.5,20000,0.01,,,1\n\
             2.5,0,,,0.1,0.3,0\n",
        )
        .unwrap();
        let r = t.rows();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].rate_bps, 1_500_000);
        assert_eq!(r[0].delay, Dur::from_millis(20));
        assert_eq!(
            r[0].loss,
            LossParams::Bernoulli(Prob::new(0.01, "p").unwrap())
        );
        assert!(r[0].up);
        assert_eq!(r[1].start, Dur::from_millis(2500));
        assert_eq!(r[1].delay, Dur::ZERO);
        let LossParams::GilbertElliott(g) = r[1].loss else {
            panic!("{:?}", r[1].loss)
        };
        assert_eq!((g.loss_good, g.loss_bad), (Prob::ZERO, Prob::ONE));
        assert!(!r[1].up);
        assert!(t.has_rate());
    }

    #[test]
    fn a_trace_started_at_an_offset_shows_the_rows_in_force_from_there() {
        let t = parse("start_ms,delay_ms\n0,1\n10,2\n30,3\n").unwrap();
        let delay_at = |t: &SeriesTrace, ms| t.row_at(Time::from_millis(ms)).delay;
        // Holding its last row: rows before the offset are gone.
        let s = t.starting_at(Dur::from_millis(15));
        for x in [0u64, 5, 14, 15, 16, 100] {
            assert_eq!(delay_at(&s, x), delay_at(&t, x + 15), "at {x}");
        }
        // Repeating: the same schedule, wrapped, over several periods.
        let t = t.with_repeat(Dur::from_millis(40)).unwrap();
        for off in [5u64, 10, 30, 39, 45] {
            let s = t.starting_at(Dur::from_millis(off));
            assert_eq!(s.repeat(), t.repeat());
            for x in 0..130u64 {
                assert_eq!(
                    delay_at(&s, x),
                    delay_at(&t, x + off),
                    "offset {off}, at {x}"
                );
            }
        }
    }

    #[test]
    fn locate_hold_and_repeat() {
        let t = parse("start_ms,delay_ms\n0,1\n10,2\n30,3\n").unwrap();
        let mut h = 0;
        assert_eq!(
            t.locate(Time::from_millis(5), &mut h),
            (0, Time::from_millis(10))
        );
        assert_eq!(
            t.locate(Time::from_millis(10), &mut h),
            (1, Time::from_millis(30))
        );
        assert_eq!(t.locate(Time::from_millis(999), &mut h), (2, Time::MAX));
        assert_eq!(
            t.locate(Time::from_millis(1), &mut h),
            (0, Time::from_millis(10))
        );
        let t = t.with_repeat(Dur::from_millis(40)).unwrap();
        assert_eq!(
            t.locate(Time::from_millis(35), &mut h),
            (2, Time::from_millis(40))
        );
        assert_eq!(
            t.locate(Time::from_millis(40), &mut h),
            (0, Time::from_millis(50))
        );
        assert_eq!(
            t.locate(Time::from_millis(125), &mut h),
            (0, Time::from_millis(130))
        );
        assert_eq!(
            t.locate(Time::from_millis(135), &mut h),
            (1, Time::from_millis(150))
        );
        let t2 = parse("start_ms\n0\n10\n").unwrap();
        assert!(t2.with_repeat(Dur::from_millis(10)).is_err());
    }

    #[test]
    fn csv_round_trip() {
        let t = parse(
            "start_ms,rate_kbps,delay_ms,loss_p,ge_p_gb,ge_p_bg,ge_loss_good,ge_loss_bad,up\n\
             0,1000.5,12.25,0.1,,,,,1\n\
             7.000001,0,0,,0.01,0.5,0.001,0.9,0\n\
             9,5,1,0,,,,,1\n",
        )
        .unwrap();
        let again = parse(&t.to_csv()).unwrap();
        assert_eq!(t.rows(), again.rows());
        let built = SeriesTrace::from_rows(t.rows().to_vec(), true).unwrap();
        assert_eq!(built.rows(), t.rows());
    }

    fn kind(text: &str) -> (usize, ParseErrorKind) {
        let e = parse(text).unwrap_err();
        (e.line().unwrap(), e.kind().unwrap().clone())
    }

    #[test]
    fn malformed_series_give_line_and_expectation() {
        assert!(matches!(
            kind(""),
            (1, ParseErrorKind::MissingHeader { .. })
        ));
        assert!(matches!(
            kind("# only\n"),
            (1, ParseErrorKind::MissingHeader { .. })
        ));
        assert!(matches!(kind("start_ms\n"), (1, ParseErrorKind::NoRows)));
        assert!(matches!(
            kind("start_ms,bandwidth\n"),
            (1, ParseErrorKind::UnknownColumn { .. })
        ));
        let (line, k) = kind("start_ms,rate_kbit\n0,1\n");
        assert_eq!(line, 1);
        assert!(
            matches!(&k, ParseErrorKind::UnknownUnit { found, .. } if found == "kbit"),
            "{k}"
        );
        assert!(
            k.to_string()
                .contains("expected a unit among bps, kbps, mbps, gbps"),
            "{k}"
        );
        assert!(matches!(
            kind("start\n0\n"),
            (1, ParseErrorKind::UnknownUnit { .. })
        ));
        assert!(matches!(
            kind("delay_ms,delay_us\n"),
            (1, ParseErrorKind::DuplicateColumn { .. })
        ));
        assert!(matches!(
            kind("delay_ms\n1\n"),
            (1, ParseErrorKind::MissingColumn { .. })
        ));
        assert!(matches!(
            kind("start_ms,delay_ms\n0,1\n5\n"),
            (
                3,
                ParseErrorKind::FieldCount {
                    expected: 2,
                    found: 1
                }
            )
        ));
        assert!(matches!(
            kind("start_ms,delay_ms\n0,1\n5,x\n"),
            (3, ParseErrorKind::BadValue { .. })
        ));
        assert!(matches!(
            kind("start_ms,delay_ms\n0,-1\n"),
            (2, ParseErrorKind::BadValue { .. })
        ));
        assert!(matches!(
            kind("start_ms,loss_p\n0,5\n"),
            (2, ParseErrorKind::BadValue { .. })
        ));
        assert!(matches!(
            kind("start_ms,up\n0,yes\n"),
            (2, ParseErrorKind::BadValue { .. })
        ));
        assert!(matches!(
            kind("start_ms,rate_kbps\n0,\n"),
            (2, ParseErrorKind::BadValue { .. })
        ));
        assert!(matches!(
            kind("start_ms\n0\n5\n5\n"),
            (4, ParseErrorKind::NotIncreasing { .. })
        ));
        assert!(matches!(
            kind("start_ms\n3\n"),
            (2, ParseErrorKind::FirstStartNotZero { .. })
        ));
        assert!(matches!(
            kind("start_ms,ge_p_gb\n0,0.1\n"),
            (2, ParseErrorKind::BadValue { .. })
        ));
        assert!(matches!(
            kind("start_ms,loss_p,ge_p_gb,ge_p_bg\n0,0.1,0.1,0.2\n"),
            (2, ParseErrorKind::BadValue { .. })
        ));
        let e = parse("start_ms,delay_ms\n0,1\n5,x\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "s.csv:3: column \"delay_ms\": expected a non-negative delay, or empty for 0, found \"x\""
        );
    }
}
