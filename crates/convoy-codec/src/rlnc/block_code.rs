//! RLNC behind the [`BlockEncoder`]/[`BlockDecoder`] traits: encoding symbol
//! id < g is systematic, any other id names a coded symbol through
//! [`super::block_seed`].

use super::{Decoder, Encoder, Generation, SymbolKind};
use crate::block::{BlockDecoder, BlockEncoder, BlockInfo, CodeKind, Pushed};
use crate::error::CodecError;

#[derive(Clone)]
pub struct RlncBlockEncoder {
    info: BlockInfo,
    encoder: Encoder,
}

impl RlncBlockEncoder {
    pub fn new(info: BlockInfo, data: Vec<u8>) -> Result<Self, CodecError> {
        info.validate_for(CodeKind::Rlnc)?;
        info.check_data(&data)?;
        let encoder = Encoder::from_vec(data, info.symbol_size.into())?;
        Ok(RlncBlockEncoder { info, encoder })
    }
}

impl BlockEncoder for RlncBlockEncoder {
    fn info(&self) -> &BlockInfo {
        &self.info
    }

    fn boxed_clone(&self) -> Box<dyn BlockEncoder> {
        Box::new(self.clone())
    }

    fn write_symbol(&self, esi: u32, out: &mut [u8]) -> Result<(), CodecError> {
        let g = self.encoder.generation().size();
        let kind = SymbolKind::from_esi(self.info.block_id, esi, g);
        self.encoder.write(kind, out)
    }

    fn write_prefix_symbol(
        &self,
        esi: u32,
        covered: u32,
        out: &mut [u8],
    ) -> Result<(), CodecError> {
        let g = self.encoder.generation().size();
        let kind = prefix_kind(self.info.block_id, esi, covered, g)?;
        self.encoder.write(kind, out)
    }
}

/// A prefix symbol names a repair id (sources are never partial) and the
/// sources it combines; its coefficients expand from the repair's seed.
fn prefix_kind(
    block_id: u32,
    esi: u32,
    covered: u32,
    g: usize,
) -> Result<SymbolKind<'static>, CodecError> {
    if (esi as usize) < g {
        return Err(CodecError::InvalidParams(format!(
            "prefix symbol id {esi} names a source symbol (K = {g})"
        )));
    }
    Ok(SymbolKind::Prefix {
        seed: super::block_seed(block_id, esi),
        covered,
    })
}

#[derive(Clone)]
pub struct RlncBlockDecoder {
    info: BlockInfo,
    decoder: Decoder,
}

impl RlncBlockDecoder {
    pub fn new(info: BlockInfo) -> Result<Self, CodecError> {
        info.validate_for(CodeKind::Rlnc)?;
        let generation = Generation::new(info.source_symbols() as usize, info.symbol_size.into())?;
        Ok(RlncBlockDecoder {
            info,
            decoder: Decoder::new(generation),
        })
    }

    /// The underlying decoder, for its rank and work counters.
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }
}

impl BlockDecoder for RlncBlockDecoder {
    fn info(&self) -> &BlockInfo {
        &self.info
    }

    fn boxed_clone(&self) -> Box<dyn BlockDecoder> {
        Box::new(self.clone())
    }

    fn push(&mut self, block_id: u32, esi: u32, payload: &[u8]) -> Result<Pushed, CodecError> {
        self.info.check_block(block_id)?;
        let g = self.decoder.generation().size();
        let kind = SymbolKind::from_esi(block_id, esi, g);
        self.decoder.push(kind, payload)
    }

    fn useful_symbols(&self) -> usize {
        self.decoder.rank()
    }

    fn is_decodable(&mut self) -> bool {
        self.decoder.is_complete()
    }

    fn push_prefix(
        &mut self,
        block_id: u32,
        esi: u32,
        covered: u32,
        payload: &[u8],
    ) -> Result<Pushed, CodecError> {
        self.info.check_block(block_id)?;
        let g = self.decoder.generation().size();
        let kind = prefix_kind(block_id, esi, covered, g)?;
        self.decoder.push(kind, payload)
    }

    fn source_symbol(&self, i: u32) -> Option<&[u8]> {
        self.decoder.source_symbol(i as usize)
    }

    fn data(&mut self) -> Result<&[u8], CodecError> {
        let len = self.info.data_len as usize;
        match self.decoder.decoded() {
            Some(data) => Ok(&data[..len]),
            None => Err(CodecError::NotDecodable {
                have: self.decoder.rank(),
                needed: self.decoder.generation().size(),
            }),
        }
    }
}
