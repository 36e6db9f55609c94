//! Where one DBC signal sits in a frame and how its raw bits become a
//! physical value. Our own code on top of `can-dbc`, which parses the
//! file but does not decode frames.

use super::candump::MAX_DATA;

/// Bytes a payload is copied into before decoding: the payload, then
/// zeros, so a 16-byte read from any start byte stays in bounds.
pub const PADDED: usize = MAX_DATA + 16;

/// How the raw bits are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Unsigned,
    Signed,
    /// IEEE 754 single (`SIG_VALTYPE_ … : 1`), 32 raw bits.
    Float32,
    /// IEEE 754 double (`SIG_VALTYPE_ … : 2`), 64 raw bits.
    Float64,
}

/// A signal's position, resolved once when the DBC is loaded.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// First payload byte read.
    byte: usize,
    /// Little endian (Intel): right shift of the 128-bit little-endian
    /// word read from `byte`. Big endian (Motorola): the same for the
    /// big-endian word.
    shift: u32,
    little_endian: bool,
    pub size: u32,
    mask: u64,
    pub kind: Kind,
    pub factor: f64,
    pub offset: f64,
    /// The last payload byte the signal touches plus one: a shorter
    /// frame cannot carry it.
    pub needs: usize,
}

impl Layout {
    /// `start_bit` as DBC gives it: the least significant bit of an Intel
    /// signal, the most significant bit (in the "sawtooth" numbering,
    /// bit 7 of byte 0 is 7, bit 0 of byte 1 is 8) of a Motorola one.
    pub fn new(
        start_bit: u64,
        size: u64,
        little_endian: bool,
        kind: Kind,
        factor: f64,
        offset: f64,
    ) -> Result<Layout, String> {
        if size == 0 || size > 64 {
            return Err(format!("a signal of {size} bits (1 to 64 can be decoded)"));
        }
        let bits = (MAX_DATA * 8) as u64;
        // Checked first, so the sums below cannot wrap on a start bit
        // near u64::MAX that a hostile DBC may hold.
        if start_bit >= bits {
            return Err(format!("start bit {start_bit} lies past a 64-byte frame"));
        }
        let (byte, shift, last_bit) = if little_endian {
            let last = start_bit + size - 1;
            (start_bit / 8, (start_bit % 8) as u32, last)
        } else {
            // Number bits in reading order instead: byte 0 bit 7 first.
            let msb = (start_bit / 8) * 8 + (7 - start_bit % 8);
            let lsb = msb + size - 1;
            let shift = 128 - (msb % 8) - size;
            (msb / 8, shift as u32, lsb)
        };
        if last_bit >= bits {
            return Err(format!("bits {start_bit}+{size} lie past a 64-byte frame"));
        }
        if matches!(kind, Kind::Float32) && size != 32
            || matches!(kind, Kind::Float64) && size != 64
        {
            return Err(format!("a float signal of {size} bits"));
        }
        Ok(Layout {
            byte: byte as usize,
            shift,
            little_endian,
            size: size as u32,
            mask: if size == 64 {
                u64::MAX
            } else {
                (1u64 << size) - 1
            },
            kind,
            factor,
            offset,
            needs: (last_bit / 8 + 1) as usize,
        })
    }

    /// The raw bits, right-aligned.
    #[inline]
    pub fn raw(&self, data: &[u8; PADDED]) -> u64 {
        let mut word = [0u8; 16];
        word.copy_from_slice(&data[self.byte..self.byte + 16]);
        let w = if self.little_endian {
            u128::from_le_bytes(word)
        } else {
            u128::from_be_bytes(word)
        };
        (w >> self.shift) as u64 & self.mask
    }

    /// The physical value: raw × factor + offset.
    #[inline]
    pub fn value(&self, data: &[u8; PADDED]) -> f64 {
        let raw = self.raw(data);
        let x = match self.kind {
            Kind::Unsigned => raw as f64,
            Kind::Signed => {
                let unused = 64 - self.size;
                (((raw << unused) as i64) >> unused) as f64
            }
            Kind::Float32 => f64::from(f32::from_bits(raw as u32)),
            Kind::Float64 => f64::from_bits(raw),
        };
        x * self.factor + self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn padded(bytes: &[u8]) -> [u8; PADDED] {
        let mut d = [0u8; PADDED];
        d[..bytes.len()].copy_from_slice(bytes);
        d
    }

    #[test]
    fn intel_and_motorola_fields() {
        let d = padded(&[0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0]);
        // Intel 16 bits at 0: bytes 0x12 then 0x34, little end first.
        let l = Layout::new(0, 16, true, Kind::Unsigned, 1.0, 0.0).unwrap();
        assert_eq!(l.raw(&d), 0x3412);
        // Intel 4 bits at bit 4: the high nibble of byte 0.
        let l = Layout::new(4, 4, true, Kind::Unsigned, 1.0, 0.0).unwrap();
        assert_eq!(l.raw(&d), 0x1);
        // Motorola 16 bits with MSB at bit 7: bytes 0x12, 0x34 big end first.
        let l = Layout::new(7, 16, false, Kind::Unsigned, 1.0, 0.0).unwrap();
        assert_eq!(l.raw(&d), 0x1234);
        assert_eq!(l.needs, 2);
        // Motorola 12 bits with MSB at bit 3: low nibble of byte 0, byte 1.
        let l = Layout::new(3, 12, false, Kind::Unsigned, 1.0, 0.0).unwrap();
        assert_eq!(l.raw(&d), 0x234);
        // Signed, factor and offset.
        let d = padded(&[0xFF, 0xFF]);
        let l = Layout::new(0, 16, true, Kind::Signed, 0.5, 10.0).unwrap();
        assert_eq!(l.value(&d), -0.5 + 10.0);
        // A whole 64-bit field at the end of a 64-byte frame.
        let mut bytes = [0u8; 64];
        bytes[56..].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        let l = Layout::new(448, 64, true, Kind::Unsigned, 1.0, 0.0).unwrap();
        assert_eq!(l.raw(&padded(&bytes)), 0x0807_0605_0403_0201);
        assert!(Layout::new(449, 64, true, Kind::Unsigned, 1.0, 0.0).is_err());
        assert!(Layout::new(0, 0, true, Kind::Unsigned, 1.0, 0.0).is_err());
        for little in [true, false] {
            assert!(Layout::new(u64::MAX - 3, 16, little, Kind::Unsigned, 1.0, 0.0).is_err());
        }
    }
}
