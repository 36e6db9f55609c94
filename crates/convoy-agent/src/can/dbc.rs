//! A DBC file made into a frame decoder: `can-dbc` parses the file,
//! and each message becomes a table of [`Layout`]s looked up by id.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;

use can_dbc::{ByteOrder, MessageId, MultiplexIndicator, SignalExtendedValueType, ValueType};

use super::candump::Frame;
use super::signal::{Kind, Layout, PADDED};

/// One decodable signal of a message.
#[derive(Clone, Debug)]
pub struct SignalDef {
    pub name: String,
    pub layout: Layout,
    /// `Some(v)`: decoded only when the message's multiplexor reads `v`.
    pub mux_value: Option<u64>,
}

/// One message: its signals and its multiplexor, if any.
#[derive(Clone, Debug)]
pub struct MessageDef {
    pub name: String,
    pub signals: Vec<SignalDef>,
    multiplexor: Option<Layout>,
    /// The payload bytes its plain signals need.
    needs: usize,
}

/// Frame ids are small integers already spread well; SipHash would cost
/// more than the rest of a frame's decoding.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The key of a message: the id, with bit 31 set for a 29-bit one (as
/// DBC files write extended ids).
fn key(id: u32, extended: bool) -> u32 {
    if extended {
        id | 1 << 31
    } else {
        id
    }
}

/// What a frame was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Decoded; the index of its message in [`Decoder::messages`].
    Decoded(usize),
    /// Not in the DBC: a bus carries many messages nobody asked for.
    Unknown,
    /// Shorter than its signals need, or a remote request (no data).
    TooShort,
}

/// The decoder of one DBC file.
pub struct Decoder {
    messages: Vec<MessageDef>,
    by_id: HashMap<u32, usize, BuildHasherDefault<IdHasher>>,
    /// Signals left out, with why (extended multiplexing, > 64 bits).
    pub skipped: Vec<String>,
}

impl Decoder {
    /// Reads and parses a DBC file; the error names the file and, for a
    /// syntax error, the line and column.
    pub fn load(path: &Path) -> Result<Decoder, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        // DBC files are often cp1252; names and numbers are ASCII, and
        // comments we do not use may lose their accents.
        let text = String::from_utf8_lossy(&bytes);
        Decoder::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Decoder, String> {
        let dbc = can_dbc::Dbc::try_from(text).map_err(|e| format!("not a valid DBC file: {e}"))?;
        let mut skipped = Vec::new();
        let float_kind = |id: MessageId, name: &str| {
            dbc.signal_extended_value_type_list
                .iter()
                .find(|t| t.message_id == id && t.signal_name == name)
                .map(|t| t.signal_extended_value_type)
        };
        let extended_mux: Vec<(MessageId, &str)> = dbc
            .extended_multiplex
            .iter()
            .map(|m| (m.message_id, m.signal_name.as_str()))
            .collect();
        let mut messages = Vec::new();
        let mut by_id = HashMap::default();
        for m in &dbc.messages {
            let mut def = MessageDef {
                name: m.name.clone(),
                signals: Vec::new(),
                multiplexor: None,
                needs: 0,
            };
            for s in &m.signals {
                let kind = match (float_kind(m.id, &s.name), s.value_type) {
                    (Some(SignalExtendedValueType::IEEEfloat32Bit), _) => Kind::Float32,
                    (Some(SignalExtendedValueType::IEEEdouble64bit), _) => Kind::Float64,
                    (_, ValueType::Signed) => Kind::Signed,
                    (_, ValueType::Unsigned) => Kind::Unsigned,
                };
                let layout = match Layout::new(
                    s.start_bit,
                    s.size,
                    s.byte_order == ByteOrder::LittleEndian,
                    kind,
                    s.factor,
                    s.offset,
                ) {
                    Ok(l) => l,
                    Err(e) => {
                        skipped.push(format!("{}.{}: {e}", m.name, s.name));
                        continue;
                    }
                };
                let nested = extended_mux.contains(&(m.id, s.name.as_str()));
                let mux_value = match s.multiplexer_indicator {
                    _ if nested => {
                        skipped.push(format!(
                            "{}.{}: extended multiplexing (SG_MUL_VAL_) is not decoded",
                            m.name, s.name
                        ));
                        continue;
                    }
                    MultiplexIndicator::Plain => None,
                    MultiplexIndicator::Multiplexor => {
                        def.multiplexor = Some(layout);
                        None
                    }
                    MultiplexIndicator::MultiplexedSignal(v) => Some(v),
                    MultiplexIndicator::MultiplexorAndMultiplexedSignal(_) => {
                        skipped.push(format!(
                            "{}.{}: a multiplexor inside a multiplexed group is not decoded",
                            m.name, s.name
                        ));
                        continue;
                    }
                };
                if mux_value.is_none() {
                    def.needs = def.needs.max(layout.needs);
                }
                def.signals.push(SignalDef {
                    name: s.name.clone(),
                    layout,
                    mux_value,
                });
            }
            by_id.insert(
                key(
                    m.id.raw() & 0x1FFF_FFFF,
                    matches!(m.id, MessageId::Extended(_)),
                ),
                messages.len(),
            );
            messages.push(def);
        }
        Ok(Decoder {
            messages,
            by_id,
            skipped,
        })
    }

    pub fn messages(&self) -> &[MessageDef] {
        &self.messages
    }

    /// The message of a frame id, if the DBC has it.
    pub fn message_index(&self, id: u32, extended: bool) -> Option<usize> {
        self.by_id.get(&key(id, extended)).copied()
    }

    /// Decodes one frame, calling `each(signal index, physical value)`
    /// for every signal it carries (a multiplexed signal only when the
    /// multiplexor selects it).
    #[inline]
    pub fn decode(&self, frame: &Frame<'_>, mut each: impl FnMut(usize, f64)) -> Outcome {
        let Some(index) = self.message_index(frame.id, frame.extended) else {
            return Outcome::Unknown;
        };
        let msg = &self.messages[index];
        if frame.remote || frame.len < msg.needs {
            return Outcome::TooShort;
        }
        let mut data = [0u8; PADDED];
        data[..frame.len].copy_from_slice(frame.payload());
        let selected = msg.multiplexor.map(|m| m.raw(&data));
        for (i, s) in msg.signals.iter().enumerate() {
            if s.mux_value.is_some() && (s.mux_value != selected || s.layout.needs > frame.len) {
                continue;
            }
            each(i, s.layout.value(&data));
        }
        Outcome::Decoded(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DBC: &str = r#"VERSION ""

NS_ :

BS_:

BU_: ECU

BO_ 256 Speed: 8 ECU
 SG_ VehicleSpeed : 0|16@1+ (0.01,0) [0|655.35] "km/h" ECU

BO_ 1024 Mux: 8 ECU
 SG_ Page M : 0|8@1+ (1,0) [0|255] "" ECU
 SG_ A m0 : 8|8@1+ (1,0) [0|255] "" ECU
 SG_ B m1 : 8|8@1- (1,0) [0|255] "" ECU

BO_ 2566848512 Ext: 8 ECU
 SG_ Gear : 8|4@1- (1,0) [-8|7] "" ECU
"#;

    fn frame(line: &str) -> Frame<'_> {
        super::super::candump::parse_line(line).unwrap()
    }

    #[test]
    fn decodes_by_id_mux_and_extended() {
        let d = Decoder::parse(DBC).unwrap();
        let mut got = Vec::new();
        let out = d.decode(&frame("(1.0) can0 100#B80B"), |i, v| got.push((i, v)));
        assert_eq!(out, Outcome::Decoded(0));
        assert_eq!(got, vec![(0, 30.0)]);
        got.clear();
        d.decode(&frame("(1.0) can0 400#01FF"), |i, v| got.push((i, v)));
        assert_eq!(got, vec![(0, 1.0), (2, -1.0)]);
        got.clear();
        d.decode(&frame("(1.0) can0 18FF0000#000F"), |i, v| got.push((i, v)));
        assert_eq!(got, vec![(0, -1.0)]);
        // The same number as an 11-bit id is another message.
        assert_eq!(
            d.decode(&frame("(1.0) can0 0FF#00"), |_, _| {}),
            Outcome::Unknown
        );
        assert_eq!(
            d.decode(&frame("(1.0) can0 100#B8"), |_, _| {}),
            Outcome::TooShort
        );
        assert_eq!(
            d.decode(&frame("(1.0) can0 100#R"), |_, _| {}),
            Outcome::TooShort
        );
    }

    #[test]
    fn a_broken_dbc_says_where() {
        let e = Decoder::parse("VERSION \"\"\n\nBO_ 256 Speed: 8 ECU\n SG_ VehicleSpeed : 0|16@1+ (0.01,0 [0|655.35] \"km/h\" ECU\n").err().unwrap();
        assert!(
            e.contains("not a valid DBC file") && e.contains("4:"),
            "{e}"
        );
    }
}
