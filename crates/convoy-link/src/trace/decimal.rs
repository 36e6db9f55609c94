//! Exact decimal <-> scaled integer conversion for trace values.
//!
//! "12.5" ms must become exactly 12 500 000 ns on every platform, so values
//! are converted with integer arithmetic, never through `f64`. Exponent
//! notation is accepted because pandas writes small floats as `1e-05`.

/// Largest number of significant mantissa digits accepted; pandas writes at
/// most 17, and 30 keeps every intermediate inside `u128`.
const MAX_DIGITS: u32 = 30;

/// Parses a non-negative decimal such as `12`, `0.25`, `.5`, `1e-3` or
/// `2.5E3` and returns `value * 10^scale` rounded to the nearest integer
/// (halves up). `None` if the text is not such a number or the result does
/// not fit in `u64`.
pub(crate) fn parse_scaled(text: &str, scale: u32) -> Option<u64> {
    let s = text.strip_prefix('+').unwrap_or(text);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], parse_exponent(&s[i + 1..])?),
        None => (s, 0),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut digits: u128 = 0;
    let mut significant = 0u32;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        if !b.is_ascii_digit() {
            return None;
        }
        if digits > 0 || b != b'0' {
            significant += 1;
            if significant > MAX_DIGITS {
                return None;
            }
        }
        digits = digits * 10 + u128::from(b - b'0');
    }
    let shift = exponent + i64::from(scale) - frac_part.len() as i64;
    let value = if shift >= 0 {
        if digits == 0 {
            0
        } else {
            let shift = u32::try_from(shift).ok().filter(|&s| s <= 38)?;
            digits.checked_mul(10u128.pow(shift))?
        }
    } else {
        let down = (-shift) as u64;
        if down > 38 {
            // digits < 10^30, so the value is below 10^-8: rounds to 0.
            0
        } else {
            let div = 10u128.pow(down as u32);
            (digits + div / 2) / div
        }
    };
    u64::try_from(value).ok()
}

fn parse_exponent(s: &str) -> Option<i64> {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let v: i64 = digits.parse().ok()?;
    Some(if negative { -v } else { v })
}

/// Formats `value / 10^scale` as the shortest exact decimal.
pub(crate) fn format_scaled(value: u64, scale: u32) -> String {
    let div = 10u64.pow(scale);
    let int = value / div;
    let frac = value % div;
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{frac:0width$}", width = scale as usize);
    format!("{int}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_conversion() {
        assert_eq!(parse_scaled("12.5", 6), Some(12_500_000));
        assert_eq!(parse_scaled("0", 9), Some(0));
        assert_eq!(parse_scaled(".5", 3), Some(500));
        assert_eq!(parse_scaled("5.", 3), Some(5000));
        assert_eq!(parse_scaled("1e-05", 9), Some(10_000));
        assert_eq!(parse_scaled("2.5E3", 0), Some(2500));
        assert_eq!(parse_scaled("0.0000000005", 9), Some(1)); // half rounds up
        assert_eq!(parse_scaled("0.0000000004", 9), Some(0));
        assert_eq!(parse_scaled("1000.0", 6), Some(1_000_000_000));
        assert_eq!(parse_scaled("1e99999", 9), None); // exponent too long
        assert_eq!(parse_scaled("1e999", 9), None); // too large
        assert_eq!(parse_scaled("0e99", 9), Some(0));
        for bad in [
            "", ".", "-1", "1,5", "abc", "1e", "nan", "inf", "1.2.3", " 1",
        ] {
            assert_eq!(parse_scaled(bad, 3), None, "{bad}");
        }
        assert_eq!(parse_scaled("18446744073709551616", 0), None);
        assert_eq!(parse_scaled("18446744073709551615", 0), Some(u64::MAX));
    }

    #[test]
    fn format_round_trips() {
        for (v, s) in [(12_500_000u64, 6u32), (0, 3), (1, 9), (123_456_789, 3)] {
            let text = format_scaled(v, s);
            assert_eq!(parse_scaled(&text, s), Some(v), "{text}");
        }
        assert_eq!(format_scaled(12_500_000, 6), "12.5");
        assert_eq!(format_scaled(7_000, 3), "7");
    }
}
