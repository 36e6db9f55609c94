//! A long-lived connection moves to new packet keys before one key has
//! protected too much (crate::crypto::SendKeys): here every 300 packets,
//! both ways, over a lossy link that reorders, and every byte still
//! arrives, under either packet AEAD. The default is every 2^30 packets
//! (2^23 under AES-256-GCM); the nonce (the 64-bit packet number) never
//! repeats either way.

use std::time::Duration;

use convoy_link::{Dur, LinkConfig, LossModel, QueueLimit};
use convoy_proto::{AeadChoice, CodeKind, Config, Keypair};
use convoy_sim::{run, TransferSpec};

fn link(seed: u64) -> LinkConfig {
    LinkConfig::constant(20_000_000)
        .with_delay(Dur::from_millis(10))
        .with_jitter(Dur::from_millis(2), true)
        .with_loss(LossModel::Bernoulli { p: 0.02 })
        .with_queue(QueueLimit::Packets(300))
        .with_seed(seed)
}

#[test]
fn keys_update_every_few_hundred_packets_and_nothing_is_lost() {
    for (code, aead) in [
        (CodeKind::RaptorQ, AeadChoice::ChaCha20Poly1305),
        (CodeKind::Rlnc, AeadChoice::Aes256Gcm),
    ] {
        let mut c = Config::new(Keypair::generate()).with_code(code);
        let mut s = Config::new(Keypair::generate()).with_code(code);
        c.aead = aead;
        s.aead = aead;
        c.seed = Some(11);
        s.seed = Some(12);
        c.key_update_packets = 300;
        s.key_update_packets = 300;
        let mut spec = TransferSpec::new(link(1), link(2), c, s);
        spec.upload = 4_000_000;
        spec.download = 2_000_000;
        spec.time_limit = Duration::from_secs(60);
        let r = run(spec).expect("simulation runs");
        assert_eq!(r.client.aead, r.server.aead);
        assert_eq!(r.client.aead.parse(), Ok(aead), "{code:?}");
        assert_eq!(r.upload.delivered, r.upload.bytes, "{code:?} upload");
        assert_eq!(r.download.delivered, r.download.bytes, "{code:?} download");
        assert!(
            r.client.key_updates >= 5 && r.server.key_updates >= 3,
            "{code:?}: client {} server {} key updates",
            r.client.key_updates,
            r.server.key_updates
        );
        assert_eq!(
            r.client.auth_failures + r.server.auth_failures,
            0,
            "{code:?}"
        );
    }
}
