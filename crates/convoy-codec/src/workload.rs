//! The benchmark workload, written once for `cargo bench` and
//! `convoy bench codec`: one block crosses a link that loses a share of its
//! source symbols, and the sender replaces them with repair symbols. No clock
//! here; callers time the rounds.

use crate::block::{new_decoder, new_encoder, BlockEncoder, BlockInfo, CodeKind};
use crate::error::CodecError;

/// Repair symbols generated beyond the losses, in case RaptorQ needs them.
const SPARE_REPAIR: u32 = 8;

/// One block, which of its source symbols are lost, and what arrives.
pub struct LossyBlock {
    info: BlockInfo,
    data: Vec<u8>,
    lost: u32,
    /// What the receiver gets, in order: surviving source symbols, then
    /// repair symbols.
    received: Vec<(u32, Vec<u8>)>,
}

impl LossyBlock {
    /// A block of `k` symbols of `symbol_size` bytes of pseudo-random data;
    /// `round(k · loss)` source symbols, chosen from `seed`, are lost.
    pub fn new(
        code: CodeKind,
        k: u32,
        symbol_size: u16,
        loss: f64,
        seed: u64,
    ) -> Result<Self, CodecError> {
        if !(0.0..1.0).contains(&loss) {
            return Err(CodecError::InvalidParams(format!(
                "loss {loss} outside [0, 1)"
            )));
        }
        let mut rng = seed | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let len = k as usize * usize::from(symbol_size);
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let info = BlockInfo::new(code, 0, len as u32, symbol_size)?;
        let lost = (f64::from(k) * loss).round() as u32;
        // Partial Fisher–Yates: the first `lost` ids of a shuffle are lost.
        let mut ids: Vec<u32> = (0..k).collect();
        for i in 0..lost as usize {
            let j = i + (next() % (k as usize - i) as u64) as usize;
            ids.swap(i, j);
        }
        let mut is_lost = vec![false; k as usize];
        for &id in &ids[..lost as usize] {
            is_lost[id as usize] = true;
        }
        let encoder = new_encoder(code, 0, &data, symbol_size)?;
        let surviving = (0..k).filter(|&i| !is_lost[i as usize]);
        let repair = k..k + lost + SPARE_REPAIR;
        let received = surviving
            .chain(repair)
            .map(|esi| {
                let mut payload = vec![0; usize::from(symbol_size)];
                encoder
                    .write_symbol(esi, &mut payload)
                    .map(|()| (esi, payload))
            })
            .collect::<Result<_, _>>()?;
        Ok(LossyBlock {
            info,
            data,
            lost,
            received,
        })
    }

    pub fn info(&self) -> &BlockInfo {
        &self.info
    }

    /// Bytes of source data, the unit throughput is counted in.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    /// A fresh encoder for the block, to time symbols one at a time.
    pub fn encoder(&self) -> Result<Box<dyn BlockEncoder>, CodecError> {
        new_encoder(self.info.code, 0, &self.data, self.info.symbol_size)
    }

    /// Sender side: builds the encoder and writes the k source symbols plus
    /// one repair symbol per loss into `out`, as a sender fills packets.
    pub fn encode_round(&self, out: &mut [u8]) -> Result<(), CodecError> {
        let k = self.info.source_symbols();
        let encoder = new_encoder(self.info.code, 0, &self.data, self.info.symbol_size)?;
        for esi in 0..k + self.lost {
            encoder.write_symbol(esi, out)?;
        }
        Ok(())
    }

    /// Receiver side: feeds symbols until the decoder says the block is
    /// decodable, then takes the data. Returns how many symbols it needed.
    pub fn decode_round(&self) -> Result<usize, CodecError> {
        let mut decoder = new_decoder(self.info)?;
        let k = self.info.source_symbols() as usize;
        for (n, (esi, payload)) in self.received.iter().enumerate() {
            decoder.push(0, *esi, payload)?;
            if n + 1 >= k && decoder.is_decodable() {
                let data = decoder.data()?;
                if data != self.data.as_slice() {
                    return Err(CodecError::InvalidParams("decoded data differs".into()));
                }
                return Ok(n + 1);
            }
        }
        Err(CodecError::NotDecodable {
            have: decoder.useful_symbols(),
            needed: k,
        })
    }
}
