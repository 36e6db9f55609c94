//! The web view's parsers of what a client sends: the `Range` header and
//! the bearer token. Never a panic; a range that is granted lies inside
//! the object; a token verifies only as what its issuer signed (one
//! forged from the input with another key never does).
#![no_main]

use convoy_web::range::{self, RangeAsk};
use convoy_web::token;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&len_byte, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    // Object lengths from empty to huge, picked by the first byte.
    let len = match len_byte % 4 {
        0 => 0,
        1 => u64::from(len_byte),
        2 => 1 << 40,
        _ => u64::MAX,
    };
    if let RangeAsk::Part { start, end } = range::parse(Some(&text), len) {
        assert!(
            start < end && end <= len,
            "{text:?} of {len}: {start}..{end}"
        );
    }
    let key = [7u8; 32];
    if let Ok(claims) = token::verify(&key, &text, 0) {
        // Only a token made with this key verifies, and it reads back
        // what was signed.
        assert_eq!(
            token::verify(&key, &token::issue(&key, &claims), 0),
            Ok(claims)
        );
        assert!(
            token::verify(&[8u8; 32], &text, 0).is_err(),
            "{text:?} verified under two keys"
        );
    }
});
