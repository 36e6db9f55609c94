//! HTTP Range (RFC 9110 §14): one `bytes=` range, the form Foxglove and
//! other MCAP readers send. Several ranges in one request get 416 rather
//! than a multipart answer: the readers we serve ask for one at a time.

/// What a `Range` header asks of a `len`-byte object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeAsk {
    /// No header: the whole object (200).
    Whole,
    /// Bytes `start..end` (206).
    Part { start: u64, end: u64 },
    /// Cannot be satisfied (416).
    Unsatisfiable,
}

pub fn parse(header: Option<&str>, len: u64) -> RangeAsk {
    let Some(h) = header else {
        return RangeAsk::Whole;
    };
    let Some(spec) = h.trim().strip_prefix("bytes=") else {
        return RangeAsk::Unsatisfiable;
    };
    if spec.contains(',') {
        return RangeAsk::Unsatisfiable;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeAsk::Unsatisfiable;
    };
    let (a, b) = (a.trim(), b.trim());
    let parsed = match (a.is_empty(), b.is_empty()) {
        // bytes=-N: the last N bytes.
        (true, false) => b
            .parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .map(|n| (len.saturating_sub(n), len)),
        (false, true) => a.parse::<u64>().ok().map(|s| (s, len)),
        (false, false) => match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(s), Ok(e)) if e >= s => Some((s, e.saturating_add(1).min(len))),
            _ => None,
        },
        (true, true) => None,
    };
    match parsed {
        Some((start, end)) if start < len && start < end => RangeAsk::Part { start, end },
        _ => RangeAsk::Unsatisfiable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        use RangeAsk::*;
        assert_eq!(parse(None, 10), Whole);
        assert_eq!(parse(Some("bytes=0-3"), 10), Part { start: 0, end: 4 });
        assert_eq!(parse(Some("bytes=5-"), 10), Part { start: 5, end: 10 });
        assert_eq!(parse(Some("bytes=-3"), 10), Part { start: 7, end: 10 });
        assert_eq!(parse(Some("bytes=8-100"), 10), Part { start: 8, end: 10 });
        for bad in [
            "bytes=10-",
            "bytes=5-2",
            "items=0-1",
            "bytes=0-1,3-4",
            "bytes=-0",
            "bytes=x-1",
            "bytes=-",
        ] {
            assert_eq!(parse(Some(bad), 10), Unsatisfiable, "{bad}");
        }
        assert_eq!(parse(Some("bytes=0-0"), 0), Unsatisfiable);
    }

    proptest::proptest! {
        /// Any header against any length: no panic, and a part asked for
        /// always lies inside the object and is not empty.
        #[test]
        fn any_header_gives_a_range_inside_the_object(h in ".{0,60}", len in proptest::prelude::any::<u64>()) {
            if let RangeAsk::Part { start, end } = parse(Some(&h), len) {
                proptest::prop_assert!(start < end && end <= len);
            }
        }

        #[test]
        fn numeric_ranges_stay_inside(a in proptest::prelude::any::<u64>(), b in proptest::prelude::any::<u64>(), len in proptest::prelude::any::<u64>()) {
            for h in [format!("bytes={a}-{b}"), format!("bytes={a}-"), format!("bytes=-{b}")] {
                if let RangeAsk::Part { start, end } = parse(Some(&h), len) {
                    proptest::prop_assert!(start < end && end <= len, "{h} of {len}");
                }
            }
        }
    }
}
