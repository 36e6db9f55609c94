//! Sizes and rates as people type them, parsed one way everywhere.
//!
//! The agent's config file, `convoy simulate --size`, `convoy serve
//! --max-file-size`, `convoy bench load --rate` and the emulator's
//! `rate=` key each had a parser of their own, and they disagreed: one took
//! `10mb` and another refused it, none took `TB`, and a bare number was a
//! rate in one place and an error in the next. Each caller still checks
//! its own range (a transfer of 0 bytes, a link of 100 Tbit/s).
//!
//! Sizes are [`parse-size`]'s grammar, decimal by default: `1500`, `10MB`,
//! `10 mb`, `1.5GiB`, `2TB`, `4k` (the `B` is optional and case does not
//! matter; `KB` is 1,000 bytes and `KiB` 1,024). Rates are bits per second
//! and always name their unit, since a bare number could be bits or bytes:
//! `2mbit`, `500kbit`, `1.5gbit`, `64kbps`, `9600bit`.
//!
//! [`parse-size`]: https://docs.rs/parse-size

/// Why a size or rate did not parse; the message quotes what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("{0:?}: expected a size such as 1500, 10MB, 1.5GiB or 2TB")]
    Size(String),
    #[error("{0:?}: too large a size (more than 2^64 bytes)")]
    SizeTooLarge(String),
    #[error("{0:?}: expected a rate such as 2mbit, 500kbit, 1.5gbit or 64kbps")]
    Rate(String),
    #[error("{0:?}: a rate must be at least 1 bit/s and at most 2^64 bit/s")]
    RateOutOfRange(String),
}

/// A size in bytes: `1500`, `10MB`, `1.5 GiB`, `2tb` (fractions round to
/// the nearest byte).
pub fn parse_bytes(text: &str) -> Result<u64, UnitError> {
    let t = text.trim();
    // parse-size also skips `_` and spaces inside the number; a size that
    // does not start with a digit is not one (`-5`, `MB`, `.5GB`).
    if !t.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(UnitError::Size(text.to_owned()));
    }
    parse_size::parse_size(t).map_err(|e| match e {
        parse_size::Error::PosOverflow => UnitError::SizeTooLarge(text.to_owned()),
        _ => UnitError::Size(text.to_owned()),
    })
}

/// A rate in bits per second: `2mbit`, `2 Mbit`, `500kbit`, `1.5gbit`,
/// `64kbps`, `9600bit` (rounded to the nearest bit/s; at least 1).
pub fn parse_rate_bps(text: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Rate(text.to_owned());
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(bad)?;
    let (number, unit) = t.split_at(end);
    let n: f64 = number.parse().map_err(|_| bad())?;
    let scale = match unit.trim_start().to_ascii_lowercase().as_str() {
        "bit" | "bps" => 1e0,
        "kbit" | "kbps" => 1e3,
        "mbit" | "mbps" => 1e6,
        "gbit" | "gbps" => 1e9,
        _ => return Err(bad()),
    };
    let bps = (n * scale).round();
    // u64::MAX as f64 rounds up to 2^64, which does not fit: hence `<`.
    if !(1.0..u64::MAX as f64).contains(&bps) {
        return Err(UnitError::RateOutOfRange(text.to_owned()));
    }
    Ok(bps as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_in_every_form_people_type() {
        for (text, bytes) in [
            ("1500", 1500),
            ("10MB", 10_000_000),
            ("10mb", 10_000_000),
            ("10 MB", 10_000_000),
            ("4m", 4_000_000),
            ("500kB", 500_000),
            ("1KiB", 1024),
            ("1.5 KiB", 1536),
            ("64GiB", 64 << 30),
            ("2TB", 2_000_000_000_000),
            ("1TiB", 1 << 40),
            (" 0 ", 0),
            ("0.5kB", 500),
        ] {
            assert_eq!(parse_bytes(text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn sizes_that_are_not() {
        for text in [
            "",
            "MB",
            "-5MB",
            "lots",
            "10 parsecs",
            "1.2.3MB",
            "10MBit",
            ".5kB",
        ] {
            assert_eq!(
                parse_bytes(text),
                Err(UnitError::Size(text.into())),
                "{text}"
            );
        }
        assert_eq!(
            parse_bytes("100EB"),
            Err(UnitError::SizeTooLarge("100EB".into()))
        );
    }

    #[test]
    fn rates_in_every_form_people_type() {
        for (text, bps) in [
            ("2mbit", 2_000_000),
            ("2 Mbit", 2_000_000),
            ("500kbit", 500_000),
            ("1.5gbit", 1_500_000_000),
            ("1.5Gbit", 1_500_000_000),
            ("64kbps", 64_000),
            ("9600bit", 9600),
            ("0.1mbit", 100_000),
        ] {
            assert_eq!(parse_rate_bps(text), Ok(bps), "{text}");
        }
    }

    #[test]
    fn rates_that_are_not() {
        // A bare number could be bits or bytes a second: the unit is asked for.
        for text in [
            "",
            "100000",
            "2 mb",
            "2MB",
            "fast",
            "-2mbit",
            "mbit",
            "1.2.3mbit",
        ] {
            assert_eq!(
                parse_rate_bps(text),
                Err(UnitError::Rate(text.into())),
                "{text}"
            );
        }
        for text in ["0mbit", "0.1bit", "1e30gbit", "99999999999gbit"] {
            assert!(parse_rate_bps(text).is_err(), "{text}");
        }
        assert_eq!(
            parse_rate_bps("0kbit"),
            Err(UnitError::RateOutOfRange("0kbit".into()))
        );
    }

    proptest! {
        #[test]
        fn any_text_parses_or_errs_without_panicking(text in "\\PC{0,24}") {
            let _ = parse_bytes(&text);
            let _ = parse_rate_bps(&text);
        }

        #[test]
        fn whole_units_round_trip(n in 1u64..1_000_000, unit in 0usize..4) {
            let (name, scale) = [("bit", 1), ("kbit", 1_000), ("mbit", 1_000_000), ("gbit", 1_000_000_000)][unit];
            prop_assert_eq!(parse_rate_bps(&format!("{n}{name}")), Ok(n * scale));
            let (name, scale) = [("B", 1u64), ("kB", 1_000), ("MiB", 1 << 20), ("GB", 1_000_000_000)][unit];
            prop_assert_eq!(parse_bytes(&format!("{n}{name}")), Ok(n * scale));
        }
    }
}
