//! Malformed trace files: each fails with `file:line: expected ...`, never
//! a panic.

use std::path::{Path, PathBuf};

use convoy_link::{parse_records, MahimahiTrace, ParseErrorKind, SeriesTrace, TraceError};

/// Writes `text` to a file `name` in `dir`.
fn file(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn check(err: TraceError, path: &Path, line: usize, expected: &str) {
    let msg = err.to_string();
    let prefix = format!("{}:{line}: ", path.display());
    assert!(
        msg.starts_with(&prefix),
        "{msg:?} should start with {prefix:?}"
    );
    assert!(msg.contains(expected), "{msg:?} should say {expected:?}");
    assert_eq!(err.line(), Some(line));
}

#[test]
fn malformed_mahimahi_traces() {
    let cases: [(&str, &str, usize, &str); 6] = [
        ("empty.trace", "", 1, "expected at least one timestamp"),
        (
            "word.trace",
            "1\n2\nthree\n",
            3,
            "expected a non-negative integer number of milliseconds, found \"three\"",
        ),
        (
            "float.trace",
            "1\n2.5\n",
            2,
            "expected a non-negative integer",
        ),
        (
            "decreasing.trace",
            "1\n5\n5\n4\n9\n",
            4,
            "expected a timestamp >= the previous one (5 ms), found 4 ms",
        ),
        (
            "zero.trace",
            "0\n0\n0\n",
            3,
            "expected the last timestamp (the trace's period) to be greater than 0 ms",
        ),
        ("blank.trace", "1\n\n3\n", 2, "found an empty line"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, text, line, expected) in cases {
        let path = file(&dir, name, text);
        check(
            MahimahiTrace::from_file(&path).unwrap_err(),
            &path,
            line,
            expected,
        );
    }
}

#[test]
fn malformed_series_traces() {
    let cases: [(&str, &str, usize, &str); 9] = [
        ("empty.csv", "", 1, "expected a header row"),
        (
            "unit.csv",
            "start_ms,rate_kbit\n0,1\n",
            1,
            "column \"rate_kbit\": expected a unit among bps, kbps, mbps, gbps, found \"kbit\"",
        ),
        (
            "delay_unit.csv",
            "start_ms,delay_min\n0,1\n",
            1,
            "expected a unit among s, ms, us, ns",
        ),
        (
            "column.csv",
            "start_ms,bandwidth_kbps\n0,1\n",
            1,
            "expected a column name among start_<unit>",
        ),
        (
            "count.csv",
            "start_ms,rate_kbps,delay_ms\n0,100,5\n10,100\n",
            3,
            "expected 3 comma-separated fields (as in the header), found 2",
        ),
        (
            "value.csv",
            "start_ms,rate_kbps\n0,fast\n",
            2,
            "column \"rate_kbps\": expected a non-negative rate",
        ),
        (
            "percent.csv",
            "# comment\nstart_ms,loss_p\n0,5\n",
            3,
            "expected a probability between 0 and 1 (not a percentage)",
        ),
        (
            "order.csv",
            "start_ms\n0\n20\n10\n",
            4,
            "expected a value greater than the previous row's",
        ),
        (
            "start.csv",
            "start_ms\n\n100\n",
            3,
            "expected the first interval to start at 0",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, text, line, expected) in cases {
        let path = file(&dir, name, text);
        check(
            SeriesTrace::from_file(&path).unwrap_err(),
            &path,
            line,
            expected,
        );
    }
}

#[test]
fn malformed_records() {
    let e = parse_records(
        "t_ns,event,id,len,queue_delay_ns,reason\n1,enq,1,1,,\n2,drop,1,1,,gone\n",
        "r.csv",
    )
    .unwrap_err();
    assert_eq!(e.line(), Some(3));
    assert!(matches!(e.kind(), Some(ParseErrorKind::BadValue { .. })));
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A cheap fuzz: every prefix and some mutations of valid files.
    let mahimahi = "0\n1\n1\n5\n";
    let series = "start_ms,rate_kbps,delay_ms,loss_p,ge_p_gb,ge_p_bg,up\n0,100,5,0.1,,,1\n10,5,1,,0.1,0.2,0\n";
    for text in [mahimahi, series] {
        for cut in 0..=text.len() {
            let _ = MahimahiTrace::parse(&text[..cut], "fuzz");
            let _ = SeriesTrace::parse(&text[..cut], "fuzz");
        }
        for i in 0..text.len() {
            for b in [b',', b'\n', b'-', b'9', b'.', b'e', b'#', 0xff] {
                let mut bytes = text.as_bytes().to_vec();
                bytes[i] = b;
                let s = String::from_utf8_lossy(&bytes);
                let _ = MahimahiTrace::parse(&s, "fuzz");
                let _ = SeriesTrace::parse(&s, "fuzz");
            }
        }
    }
}
