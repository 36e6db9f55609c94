//! Handover interruptions: when the serving eNodeB changes, the UE has no
//! delivery opportunity for a while (LTE X2 handover: detach from the old
//! cell, random access and RRC reconfiguration at the new one; 3GPP's
//! requirement is under 50 ms for intra-frequency, measured interruptions
//! are typically 30–60 ms). One tracker is shared by `convoy trace lte`,
//! `convoy trace from-mobility` and the uplink generator, so every trace
//! marks a cell change the same way.

use std::ops::Range;

/// The interruption a handover causes by default, ms: the middle of the
/// measured 30–60 ms, and the fleet simulator's default.
pub const DEFAULT_INTERRUPTION_MS: u64 = 50;

/// Watches the serving cell, step by step, and reports each change.
#[derive(Clone, Debug)]
pub struct HandoverTracker {
    interruption_ms: u64,
    cell: Option<u32>,
    handovers: usize,
}

impl HandoverTracker {
    /// `interruption_ms` = 0 counts handovers without interrupting anything.
    pub fn new(interruption_ms: u64) -> HandoverTracker {
        HandoverTracker {
            interruption_ms,
            cell: None,
            handovers: 0,
        }
    }

    /// The UE is served by `cell` from `at_ms` on. On a change of cell,
    /// returns the interruption `[at_ms, at_ms + interruption)` during which
    /// no opportunity may be given; the first cell is an attach, not a
    /// handover.
    pub fn serve(&mut self, at_ms: u64, cell: u32) -> Option<Range<u64>> {
        let changed = self.cell.is_some_and(|c| c != cell);
        self.cell = Some(cell);
        if !changed {
            return None;
        }
        self.handovers += 1;
        (self.interruption_ms > 0).then(|| at_ms..at_ms + self.interruption_ms)
    }

    pub fn interruption_ms(&self) -> u64 {
        self.interruption_ms
    }

    /// Cell changes seen so far.
    pub fn handovers(&self) -> usize {
        self.handovers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_change_of_cell_interrupts() {
        let mut h = HandoverTracker::new(40);
        assert_eq!(h.serve(0, 3), None, "attach");
        assert_eq!(h.serve(1000, 3), None);
        assert_eq!(h.serve(2000, 4), Some(2000..2040));
        assert_eq!(h.serve(3000, 3), Some(3000..3040));
        assert_eq!(h.handovers(), 2);
        let mut quiet = HandoverTracker::new(0);
        quiet.serve(0, 1);
        assert_eq!(quiet.serve(5, 2), None);
        assert_eq!(quiet.handovers(), 1);
    }
}
