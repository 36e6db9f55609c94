//! What the simulator's tests share: the cellular experiment's link and
//! the shared drive traces (not in the repository).

use std::path::PathBuf;
use std::sync::Arc;

use convoy_link::{Dur, LinkConfig, MahimahiTrace, QueueLimit};

/// The cellular experiment's link over trace `t`: 20 ms one way, 200
/// packets of queue.
pub fn cellular_link(t: &MahimahiTrace) -> LinkConfig {
    LinkConfig::mahimahi(Arc::new(t.clone()))
        .with_delay(Dur::from_millis(20))
        .with_queue(QueueLimit::Packets(200))
}

/// Both directions of a shared drive (`TMobile-LTE-short`: its `.up` and
/// `.down`), from `CONVOY_SHARED`/traces, else /work/shared/traces; `None`
/// (and a line saying the test is skipped) where they are not.
pub fn shared_drive(name: &str) -> Option<(MahimahiTrace, MahimahiTrace)> {
    let shared = std::env::var("CONVOY_SHARED").unwrap_or_else(|_| "/work/shared".into());
    let dir = PathBuf::from(shared).join("traces");
    match (
        MahimahiTrace::from_file(dir.join(format!("{name}.up"))),
        MahimahiTrace::from_file(dir.join(format!("{name}.down"))),
    ) {
        (Ok(up), Ok(down)) => Some((up, down)),
        _ => {
            eprintln!("no {name} trace under {}: skipped", dir.display());
            None
        }
    }
}
