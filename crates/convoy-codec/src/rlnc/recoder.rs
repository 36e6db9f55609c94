//! RLNC recoder: a relay (a platoon head, a roadside unit) mixes the coded
//! symbols it holds into fresh ones without decoding, so downstream losses
//! are repaired from the relay instead of from the source.

use super::basis::{Basis, Step};
use super::{coefficients, combine_into, Generation, SymbolKind};
use crate::block::Pushed;
use crate::error::CodecError;

/// Holds the useful symbols of one generation as they arrived and emits
/// random combinations of them with explicit coefficient vectors.
#[derive(Clone, Debug)]
pub struct Recoder {
    generation: Generation,
    /// Coefficient-only elimination, to refuse symbols that add nothing; the
    /// payloads are never reduced, which keeps a relay's cost per received
    /// symbol at O(g²) byte operations instead of O(g·s).
    basis: Basis,
    held_coeffs: Vec<u8>,
    held_payloads: Vec<u8>,
    scratch: Vec<u8>,
    steps: Vec<Step>,
}

impl Recoder {
    pub fn new(generation: Generation) -> Self {
        let g = generation.size();
        Recoder {
            generation,
            basis: Basis::new(g),
            held_coeffs: Vec::with_capacity(g * g),
            held_payloads: Vec::with_capacity(g * generation.symbol_size()),
            scratch: vec![0; g],
            steps: Vec::with_capacity(g),
        }
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// Symbols held, which is also the rank of what can be recoded.
    pub fn rank(&self) -> usize {
        self.basis.rank()
    }

    pub fn push(&mut self, kind: SymbolKind<'_>, payload: &[u8]) -> Result<Pushed, CodecError> {
        self.generation.check_payload(payload)?;
        self.generation.check_symbol(&kind)?;
        let g = self.generation.size();
        let start = self.held_coeffs.len();
        self.held_coeffs.resize(start + g, 0);
        let coeffs = &mut self.held_coeffs[start..];
        match kind {
            SymbolKind::Systematic(i) => coeffs[i as usize] = 1,
            SymbolKind::Seeded(_) | SymbolKind::Prefix { .. } => super::expand_kind(kind, coeffs),
            SymbolKind::Explicit(c) => coeffs.copy_from_slice(c),
        }
        self.scratch.copy_from_slice(coeffs);
        self.steps.clear();
        match self.basis.reduce(&mut self.scratch, &mut self.steps) {
            None => {
                self.held_coeffs.truncate(start);
                Ok(Pushed::Redundant)
            }
            Some(pivot) => {
                self.steps.clear();
                self.basis.insert(pivot, &mut self.scratch, &mut self.steps);
                self.held_payloads.extend_from_slice(payload);
                Ok(Pushed::Useful)
            }
        }
    }

    /// Writes a new combination of the held symbols, mixed by weights that
    /// expand from `seed`, as its coefficient vector (g bytes, relative to the
    /// source symbols) and payload.
    pub fn recode(
        &self,
        seed: u32,
        coeffs_out: &mut [u8],
        payload_out: &mut [u8],
    ) -> Result<(), CodecError> {
        let g = self.generation.size();
        if coeffs_out.len() != g {
            return Err(CodecError::WrongCoefficientCount {
                expected: g,
                got: coeffs_out.len(),
            });
        }
        self.generation.check_payload(payload_out)?;
        let held = self.rank();
        if held == 0 {
            return Err(CodecError::NothingToRecode);
        }
        let mut weights = [0u8; super::MAX_GENERATION];
        let weights = &mut weights[..held];
        coefficients::expand(seed, weights);
        coeffs_out.fill(0);
        combine_into(
            coeffs_out,
            weights.iter().copied().zip(0..),
            &self.held_coeffs,
        );
        payload_out.fill(0);
        combine_into(
            payload_out,
            weights.iter().copied().zip(0..),
            &self.held_payloads,
        );
        Ok(())
    }
}
