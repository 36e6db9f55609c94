//! Progressive RLNC decoder: each useful symbol is eliminated on arrival, so
//! when the g-th one lands the data is already in place.

use super::basis::{Basis, Step};
use super::{combine_into, Generation, SymbolKind};
use crate::block::Pushed;
use crate::error::CodecError;
use crate::gf;

/// Decodes one generation.
#[derive(Clone, Debug)]
pub struct Decoder {
    generation: Generation,
    basis: Basis,
    /// Payload of the row with pivot j at `payloads[j*s..(j+1)*s]`; once the
    /// rank is g this buffer is the source data in order.
    payloads: Vec<u8>,
    // Scratch kept between calls so a push never allocates.
    coeffs: Vec<u8>,
    residual: Vec<u8>,
    steps: Vec<Step>,
    stats: DecoderStats,
}

/// Work counters, to show where decoding effort goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Symbols offered, useful or not.
    pub received: u64,
    /// Symbols rejected as carrying nothing new.
    pub redundant: u64,
    /// Payload row operations (one `symbol_size`-byte multiply-add each).
    pub payload_row_ops: u64,
    /// Payload row operations spent on the most recent useful symbol.
    pub last_push_row_ops: u64,
}

impl Decoder {
    pub fn new(generation: Generation) -> Self {
        let g = generation.size();
        let s = generation.symbol_size();
        Decoder {
            generation,
            basis: Basis::new(g),
            payloads: vec![0; g * s],
            coeffs: vec![0; g],
            residual: vec![0; s],
            steps: Vec::with_capacity(g),
            stats: DecoderStats::default(),
        }
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    pub fn rank(&self) -> usize {
        self.basis.rank()
    }

    pub fn is_complete(&self) -> bool {
        self.basis.is_full()
    }

    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Source symbol `i`, once it is known on its own (always, once complete).
    pub fn source_symbol(&self, i: usize) -> Option<&[u8]> {
        let s = self.generation.symbol_size();
        (i < self.generation.size() && self.basis.is_unit_row(i))
            .then(|| &self.payloads[i * s..(i + 1) * s])
    }

    /// All g·s decoded bytes (the last symbol still padded), once complete.
    pub fn decoded(&self) -> Option<&[u8]> {
        self.is_complete().then_some(&self.payloads[..])
    }

    /// Takes one symbol. Input is checked before any state changes, so an
    /// error leaves the decoder as it was.
    pub fn push(&mut self, symbol: SymbolKind<'_>, payload: &[u8]) -> Result<Pushed, CodecError> {
        let g = self.generation.size();
        self.generation.check_payload(payload)?;
        self.generation.check_symbol(&symbol)?;
        self.stats.received += 1;
        if self.basis.is_full() {
            self.stats.redundant += 1;
            return Ok(Pushed::Redundant);
        }
        match symbol {
            SymbolKind::Systematic(i) => {
                let i = i as usize;
                if self.basis.is_unit_row(i) {
                    self.stats.redundant += 1;
                    return Ok(Pushed::Redundant);
                }
                if self.basis.takes_unit_freely(i) {
                    // The common case: nothing to reduce or eliminate, the
                    // payload is row i as it stands.
                    self.basis.insert_unit(i);
                    let s = self.generation.symbol_size();
                    self.payloads[i * s..(i + 1) * s].copy_from_slice(payload);
                    self.stats.last_push_row_ops = 0;
                    return Ok(Pushed::Useful);
                }
                self.coeffs.fill(0);
                self.coeffs[i] = 1;
            }
            SymbolKind::Seeded(_) | SymbolKind::Prefix { .. } => {
                super::expand_kind(symbol, &mut self.coeffs)
            }
            SymbolKind::Explicit(c) => self.coeffs.copy_from_slice(c),
        }
        debug_assert_eq!(self.coeffs.len(), g);

        self.steps.clear();
        let Some(pivot) = self.basis.reduce(&mut self.coeffs, &mut self.steps) else {
            self.stats.redundant += 1;
            return Ok(Pushed::Redundant);
        };

        // Innovative: now pay for the payload, mirroring the reduction.
        let s = self.generation.symbol_size();
        self.residual.copy_from_slice(payload);
        combine_into(
            &mut self.residual,
            self.steps.iter().map(|st| (st.coeff, st.pivot)),
            &self.payloads,
        );
        let reduce_ops = self.steps.len();

        self.steps.clear();
        let scale = self.basis.insert(pivot, &mut self.coeffs, &mut self.steps);
        gf::mul_region(&mut self.residual, scale);
        for step in &self.steps {
            let row = &mut self.payloads[step.pivot * s..(step.pivot + 1) * s];
            gf::mul_add(row, &self.residual, step.coeff);
        }
        self.payloads[pivot * s..(pivot + 1) * s].copy_from_slice(&self.residual);

        let ops = (reduce_ops + self.steps.len()) as u64;
        self.stats.payload_row_ops += ops;
        self.stats.last_push_row_ops = ops;
        Ok(Pushed::Useful)
    }
}
