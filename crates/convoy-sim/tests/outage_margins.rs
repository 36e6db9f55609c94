//! What a drive's fades do to the coding margins (issue 15). When a
//! cellular link stops carrying, the probe timeout presumes lost what was
//! in flight (most of it waits in the base station's queue and arrives
//! later), and a second of coasting into a link dead both ways is dropped
//! at the full queue. Neither is loss on the air: counted into the loss
//! rate that sizes each block's margin, they had the blocks after every
//! fade sent with repair for 50-90 % loss, each extra symbol a redundant
//! one at the receiver.

mod support;

use std::time::Duration;

use convoy_link::{Dur, MahimahiTrace};
use convoy_proto::{Config, Keypair, Mode};
use convoy_sim::{run, TransferSpec};

/// The TMobile downlink from 93 s into the drive (the shared traces, not
/// in the repository: `CONVOY_SHARED` or /work/shared), where the fades
/// cost the most redundancy: 1.5 % of the data packets arrived redundant
/// while the fades sized the margins, 0.5 % since.
#[test]
fn fades_do_not_inflate_the_margins_on_a_drive() {
    let Some((feedback, data)) = support::shared_drive("TMobile-LTE-short") else {
        return;
    };
    let at = |t: &MahimahiTrace| support::cellular_link(&t.starting_at(Dur::from_secs(93)));
    let mut c = Config::for_mode(Keypair::generate(), Mode::Tide);
    let mut s = Config::for_mode(Keypair::generate(), Mode::Tide);
    c.seed = Some(1);
    s.seed = Some(2);
    let mut spec = TransferSpec::new(at(&data), at(&feedback), c, s);
    spec.upload = u64::MAX;
    spec.duration = Some(Duration::from_secs(60));
    let r = run(spec).expect("simulation runs");
    let (sent, redundant) = (r.client.data_packets_sent, r.server.redundant_received);
    eprintln!("{sent} data packets, {redundant} redundant at the receiver");
    assert!(
        redundant * 100 < sent,
        "{redundant} of {sent} data packets arrived redundant"
    );
}
