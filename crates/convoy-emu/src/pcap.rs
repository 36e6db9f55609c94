//! A minimal pcapng writer (the format tshark and Wireshark read natively).
//!
//! pcapng rather than classic pcap because one file can then hold every
//! link direction as its own interface (`lte:up`, `lte:down`, ...), with
//! nanosecond timestamps; tshark shows the name as `frame.interface_name`.
//! Packets are raw IP (LINKTYPE_RAW), as the TUN devices carry them.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

const LINKTYPE_RAW: u16 = 101;
const BLOCK_SHB: u32 = 0x0A0D_0D0A;
const BLOCK_IDB: u32 = 1;
const BLOCK_EPB: u32 = 6;
const OPT_END: u16 = 0;
const OPT_IF_NAME: u16 = 2;
const OPT_IF_TSRESOL: u16 = 9;

/// Writes a section header and one interface per name, then packets.
pub struct PcapWriter {
    out: BufWriter<File>,
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

impl PcapWriter {
    pub fn create(path: &Path, interfaces: &[String]) -> io::Result<PcapWriter> {
        let mut w = PcapWriter {
            out: BufWriter::with_capacity(1 << 20, File::create(path)?),
        };
        // Section header: byte-order magic, version 1.0, unknown length.
        let mut shb = Vec::new();
        shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        shb.extend_from_slice(&1u16.to_le_bytes());
        shb.extend_from_slice(&0u16.to_le_bytes());
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        w.block(BLOCK_SHB, &shb)?;
        for name in interfaces {
            let mut idb = Vec::new();
            idb.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
            idb.extend_from_slice(&0u16.to_le_bytes());
            idb.extend_from_slice(&0u32.to_le_bytes()); // no snap length limit
            option(&mut idb, OPT_IF_NAME, name.as_bytes());
            option(&mut idb, OPT_IF_TSRESOL, &[9]); // nanoseconds
            option(&mut idb, OPT_END, &[]);
            w.block(BLOCK_IDB, &idb)?;
        }
        Ok(w)
    }

    fn block(&mut self, kind: u32, body: &[u8]) -> io::Result<()> {
        let total = (12 + body.len() + pad4(body.len())) as u32;
        self.out.write_all(&kind.to_le_bytes())?;
        self.out.write_all(&total.to_le_bytes())?;
        self.out.write_all(body)?;
        self.out.write_all(&[0u8; 3][..pad4(body.len())])?;
        self.out.write_all(&total.to_le_bytes())
    }

    /// One packet on interface `iface` (its index in `interfaces`) at
    /// `unix_ns` nanoseconds since the Unix epoch.
    pub fn packet(&mut self, iface: u32, unix_ns: u64, data: &[u8]) -> io::Result<()> {
        let len = data.len() as u32;
        let total = (32 + data.len() + pad4(data.len())) as u32;
        let mut head = [0u8; 28];
        head[0..4].copy_from_slice(&BLOCK_EPB.to_le_bytes());
        head[4..8].copy_from_slice(&total.to_le_bytes());
        head[8..12].copy_from_slice(&iface.to_le_bytes());
        head[12..16].copy_from_slice(&((unix_ns >> 32) as u32).to_le_bytes());
        head[16..20].copy_from_slice(&(unix_ns as u32).to_le_bytes());
        head[20..24].copy_from_slice(&len.to_le_bytes());
        head[24..28].copy_from_slice(&len.to_le_bytes());
        self.out.write_all(&head)?;
        self.out.write_all(data)?;
        self.out.write_all(&[0u8; 3][..pad4(data.len())])?;
        self.out.write_all(&total.to_le_bytes())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

fn option(buf: &mut Vec<u8>, code: u16, value: &[u8]) {
    buf.extend_from_slice(&code.to_le_bytes());
    buf.extend_from_slice(&(value.len() as u16).to_le_bytes());
    buf.extend_from_slice(value);
    buf.extend(std::iter::repeat_n(0u8, pad4(value.len())));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_and_framed() {
        let dir = std::env::temp_dir().join(format!("convoy-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.pcapng");
        let mut w = PcapWriter::create(&path, &["lte:up".into(), "lte:down".into()]).unwrap();
        w.packet(1, 1_700_000_000_123_456_789, &[0x45, 0, 0, 5, 1])
            .unwrap();
        w.flush().unwrap();
        drop(w);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        // Walk the blocks: each total length is a multiple of 4 and repeated
        // at the block's end.
        let mut at = 0;
        let mut kinds = Vec::new();
        while at < bytes.len() {
            let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
            assert_eq!(len % 4, 0);
            let tail = u32::from_le_bytes(bytes[at + len - 4..at + len].try_into().unwrap());
            assert_eq!(tail as usize, len);
            kinds.push(kind);
            at += len;
        }
        assert_eq!(kinds, [BLOCK_SHB, BLOCK_IDB, BLOCK_IDB, BLOCK_EPB]);
    }
}
