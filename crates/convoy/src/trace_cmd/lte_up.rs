//! `convoy trace lte --direction up`: the LTE uplink model (convoy-models'
//! lte_uplink) as a Mahimahi trace, one line per 1500-byte opportunity.
//! With a CSQ (constant or one per second from a file) the median SINR
//! follows that CSQ's path loss each second; without one, the fit's own
//! SINR holds. Cell changes (the file's CELL column, --handover-every)
//! interrupt the uplink through the shared handover tracker.

use anyhow::{bail, Result};
use convoy_models::handover::HandoverTracker;
use convoy_models::lte_uplink::{schedule, UplinkFit, UplinkGen};

use super::lte::{LteArgs, Second};

pub fn mahimahi(a: &LteArgs, series: Option<&[Second]>) -> Result<String> {
    let Some(fit) = UplinkFit::from_name(a.uplink_fit()) else {
        bail!(
            "--uplink-fit: expected att, tmobile or verizon, found {:?}",
            a.uplink_fit()
        );
    };
    let params = fit.params();
    let seconds = series.map_or(a.seconds() as usize, <[Second]>::len);
    // Without a CSQ series, --handover-every alternates between two cells.
    let owned: Vec<Second>;
    let series = match series {
        Some(s) => s,
        None => {
            owned = (0..seconds)
                .map(|i| Second {
                    csq: 0,
                    cell: a.handover_every().map_or(0, |e| (i as u32 / e.max(1)) % 2),
                })
                .collect();
            &owned
        }
    };
    let with_csq = a.has_csq();
    let mut gen = UplinkGen::new(params, a.seed())?;
    let mut tracker = HandoverTracker::new(a.handover_interruption_ms());
    let mut ms = Vec::new();
    for s in series {
        if with_csq {
            gen.set_sinr_db(params.at_csq(s.csq).sinr_db);
        }
        let at = gen.now_ms();
        ms.extend(schedule(&mut gen, 1000, &[(at, s.cell)], &mut tracker));
    }
    // mm-link repeats a trace after its last timestamp: end it at the
    // requested length (one opportunity there, 1500 bytes in the whole
    // trace) so the period is the trace's length even after an outage.
    ms.push(seconds as u64 * 1000);
    let mut text = String::with_capacity(ms.len() * 7);
    for t in &ms {
        text.push_str(&t.to_string());
        text.push('\n');
    }
    convoy_link::MahimahiTrace::parse(&text, "generated LTE uplink trace")
        .map_err(|e| anyhow::anyhow!("internal error: generated trace does not parse: {e}"))?;
    crate::progress::clear();
    eprintln!(
        "LTE uplink ({} fit{}): {:.3} Mbit/s over {} s, {} handovers",
        fit.name(),
        if with_csq { ", SINR from CSQ" } else { "" },
        (ms.len() - 1) as f64 * 12_000.0 / (seconds as f64 * 1000.0) / 1000.0,
        seconds,
        tracker.handovers()
    );
    Ok(text)
}
