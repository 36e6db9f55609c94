//! Handshake messages: the server's reading of an Initial's Noise field
//! (pattern byte, Noise message, transport parameters inside), the
//! client's reading of the server's reply, and the transport parameters
//! alone. Never a panic, whatever arrives.
#![no_main]

use std::sync::OnceLock;

use convoy_codec::CodeKind;
use convoy_proto::crypto::Keypair;
use convoy_proto::handshake::{ClientHandshake, ServerHandshake, TransportParams};
use libfuzzer_sys::fuzz_target;

fn params() -> TransportParams {
    TransportParams {
        code: CodeKind::Rlnc,
        max_data: 1 << 20,
        max_stream_data: 1 << 19,
        max_blocks: 16,
        idle_timeout_ms: 30_000,
        receive_times: true,
        aes_gcm: true,
        max_streams: Some(100),
    }
}

fn keys() -> &'static (Keypair, Keypair) {
    static KEYS: OnceLock<(Keypair, Keypair)> = OnceLock::new();
    KEYS.get_or_init(|| (Keypair::generate(), Keypair::generate()))
}

fuzz_target!(|data: &[u8]| {
    let (server, client) = keys();
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => {
            let _ = TransportParams::decode(rest);
        }
        1 => {
            let _ = ServerHandshake::accept(server, rest, params());
        }
        _ => {
            let key = (which & 4 != 0).then_some(&server.public);
            if let Ok((c, _)) = ClientHandshake::start(client, key, params()) {
                let _ = c.on_response(rest);
            }
        }
    }
});
