//! The application protocol's request header and reply records
//! (convoy-net's request.rs), as a server and a client read them from a
//! stream: never a panic, and whatever decodes, encoded again, decodes to
//! the same value (error messages excepted: they are read leniently, with
//! invalid UTF-8 replaced, and written cut to a bounded length).
#![no_main]

use convoy_net::request::{Reply, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((req, used))) = Request::decode(data) {
        assert!(used <= data.len());
        let bytes = req.encode();
        let again = Request::decode(&bytes).ok().flatten();
        assert_eq!(again, Some((req, bytes.len())));
    }
    let mut pos = 0;
    while let Ok(Some((reply, used))) = Reply::decode(&data[pos..]) {
        assert!(used > 0 && pos + used <= data.len());
        let bytes = reply.encode();
        let again = Reply::decode(&bytes).ok().flatten();
        if matches!(reply, Reply::Error { .. }) {
            assert!(matches!(again, Some((Reply::Error { .. }, n)) if n == bytes.len()));
        } else {
            assert_eq!(again, Some((reply, bytes.len())));
        }
        pos += used;
    }
});
