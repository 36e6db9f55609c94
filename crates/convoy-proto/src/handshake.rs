//! The Noise handshake and the transport parameters it carries.
//!
//! ```text
//! IK (client knows the server's key)      XX (it does not)
//!   Initial   -> e, es, s, ss [params]      Initial   -> e            []
//!   Handshake <- e, ee, se    [params]      Handshake <- e, ee, s, es [params]
//!                                           Handshake -> s, se        [params]
//! ```
//!
//! The first byte of the Initial's noise field names the pattern. Parameters
//! travel only in encrypted Noise payloads (XX's first message is cleartext,
//! so the client's parameters wait for its second message).

use crate::crypto::{Aead, Keypair, RecvKeys, SendKeys, NOISE_IK, NOISE_XX, PROLOGUE};
use crate::wire::cursor::{Reader, Writer};
use crate::wire::WireError;
use convoy_codec::CodeKind;

const PATTERN_IK: u8 = 0;
const PATTERN_XX: u8 = 1;
/// Largest Noise message we build or accept (the spec's limit).
const MAX_NOISE: usize = 65_535;

/// Why a handshake failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    #[error("Noise handshake failed (wrong key or corrupted message): {0}")]
    Noise(String),
    #[error("malformed handshake message: {0}")]
    Malformed(&'static str),
    #[error("the peer's static key is not allowed")]
    PeerNotAllowed,
}

impl From<snow::Error> for HandshakeError {
    fn from(e: snow::Error) -> Self {
        HandshakeError::Noise(e.to_string())
    }
}

impl From<WireError> for HandshakeError {
    fn from(_: WireError) -> Self {
        HandshakeError::Malformed("transport parameters")
    }
}

/// What each side tells the other during the handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportParams {
    /// The code both directions use (the client's choice, echoed).
    pub code: CodeKind,
    /// Initial connection credit in stream bytes.
    pub max_data: u64,
    /// Initial credit per stream.
    pub max_stream_data: u64,
    /// Initial limit on block ids the peer may start.
    pub max_blocks: u64,
    /// Idle timeout in milliseconds (the smaller of the two applies).
    pub idle_timeout_ms: u64,
    /// The sender of these parameters asks for a RECEIVE_TIME frame with
    /// each acknowledgment (its rate controller measures the forward path
    /// with them). Encoded as bit 0 of an optional trailing flags varint.
    pub receive_times: bool,
    /// The sender of these parameters offers AES-256-GCM for packets
    /// (bit 1 of the flags; ChaCha20-Poly1305 is always offered).
    pub aes_gcm: bool,
    /// The sender of these parameters takes PREFIX_SYMBOL frames (repairs
    /// over the first sources of an RLNC block; bit 2 of the flags). A
    /// peer sends them only when this is set, so an older peer, which
    /// would refuse the frame type, never sees one.
    pub prefix_repairs: bool,
    /// The sender of these parameters, a server, measures the client's
    /// start pair and reports it (bit 3 of the flags;
    /// connection/start_pair.rs). A client waits for that report only
    /// when this is set, so an older server costs it no wait.
    pub start_pairs: bool,
    /// Streams the sender lets its peer open at once (a varint after the
    /// flags; `None` from older peers, which neither limit streams nor
    /// read MAX_STREAMS frames).
    pub max_streams: Option<u64>,
}

const FLAG_RECEIVE_TIMES: u64 = 1;
const FLAG_AES_GCM: u64 = 2;
const FLAG_PREFIX_REPAIRS: u64 = 4;
const FLAG_START_PAIRS: u64 = 8;

impl TransportParams {
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = [0u8; 64];
        let mut w = Writer::new(&mut buf);
        let code = match self.code {
            CodeKind::Rlnc => 0,
            CodeKind::RaptorQ => 1,
        };
        for v in [
            code,
            self.max_data,
            self.max_stream_data,
            self.max_blocks,
            self.idle_timeout_ms,
            flag(self.receive_times, FLAG_RECEIVE_TIMES)
                | flag(self.aes_gcm, FLAG_AES_GCM)
                | flag(self.prefix_repairs, FLAG_PREFIX_REPAIRS)
                | flag(self.start_pairs, FLAG_START_PAIRS),
        ] {
            w.varint(v).expect("64 bytes hold six varints");
        }
        if let Some(m) = self.max_streams {
            w.varint(m).expect("64 bytes hold seven varints");
        }
        w.into_written().to_vec()
    }

    pub fn decode(bytes: &[u8]) -> Result<TransportParams, HandshakeError> {
        let mut r = Reader::new(bytes);
        let code = match r.varint()? {
            0 => CodeKind::Rlnc,
            1 => CodeKind::RaptorQ,
            _ => return Err(HandshakeError::Malformed("unknown code")),
        };
        let max_data = r.varint()?;
        let max_stream_data = r.varint()?;
        let max_blocks = r.varint()?;
        let idle_timeout_ms = r.varint()?;
        // Absent from older peers: no flags set. Unknown bits are ignored.
        let flags = if r.is_empty() { 0 } else { r.varint()? };
        let max_streams = if r.is_empty() {
            None
        } else {
            Some(r.varint()?)
        };
        Ok(TransportParams {
            code,
            max_data,
            max_stream_data,
            max_blocks,
            idle_timeout_ms,
            receive_times: flags & FLAG_RECEIVE_TIMES != 0,
            aes_gcm: flags & FLAG_AES_GCM != 0,
            prefix_repairs: flags & FLAG_PREFIX_REPAIRS != 0,
            start_pairs: flags & FLAG_START_PAIRS != 0,
            max_streams,
        })
    }
}

fn flag(set: bool, bit: u64) -> u64 {
    if set {
        bit
    } else {
        0
    }
}

/// The result of a finished handshake.
#[cfg_attr(feature = "fuzzing", derive(Clone))]
pub struct Established {
    pub send: SendKeys,
    pub recv: RecvKeys,
    pub peer_static: [u8; 32],
    pub peer_params: TransportParams,
}

impl std::fmt::Debug for Established {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Established")
            .field("peer_params", &self.peer_params)
            .finish_non_exhaustive()
    }
}

fn builder(pattern: &str) -> snow::Builder<'static> {
    snow::Builder::new(pattern.parse().expect("valid Noise pattern"))
}

fn finish(
    mut hs: snow::HandshakeState,
    own_params: &TransportParams,
    peer_params: TransportParams,
) -> Result<Established, HandshakeError> {
    let peer_static: [u8; 32] = hs
        .get_remote_static()
        .and_then(|k| k.try_into().ok())
        .ok_or(HandshakeError::Malformed("no peer static key"))?;
    let (to_responder, to_initiator) = hs.dangerously_get_raw_split();
    let (send, recv) = if hs.is_initiator() {
        (to_responder, to_initiator)
    } else {
        (to_initiator, to_responder)
    };
    let aead = Aead::negotiate(own_params.aes_gcm, peer_params.aes_gcm);
    Ok(Established {
        send: SendKeys::new(aead, &send),
        recv: RecvKeys::new(aead, &recv),
        peer_static,
        peer_params,
    })
}

fn write(hs: &mut snow::HandshakeState, payload: &[u8]) -> Result<Vec<u8>, HandshakeError> {
    let mut out = vec![0u8; MAX_NOISE];
    let n = hs.write_message(payload, &mut out)?;
    // Only the message's bytes: the reply is kept for retransmission as
    // long as the handshake lasts, and with the room for Noise's largest
    // message it held 64 KB per connection (an unregistered key's whole
    // cost was 83 KB).
    out.truncate(n);
    out.shrink_to_fit();
    Ok(out)
}

fn read(hs: &mut snow::HandshakeState, msg: &[u8]) -> Result<Vec<u8>, HandshakeError> {
    let mut out = vec![0u8; msg.len()];
    let n = hs.read_message(msg, &mut out)?;
    out.truncate(n);
    Ok(out)
}

/// The client's side of the handshake.
pub struct ClientHandshake {
    hs: snow::HandshakeState,
    params: TransportParams,
}

/// What the client does after the server's reply.
pub struct ClientDone {
    pub established: Established,
    /// XX's third message, to send in a Handshake packet (and to resend until
    /// the server shows it has it).
    pub final_message: Option<Vec<u8>>,
}

impl ClientHandshake {
    /// Starts a handshake; returns the Initial's noise field.
    pub fn start(
        local: &Keypair,
        server_key: Option<&[u8; 32]>,
        params: TransportParams,
    ) -> Result<(ClientHandshake, Vec<u8>), HandshakeError> {
        let (mut hs, pattern, payload) = match server_key {
            Some(key) => (
                builder(NOISE_IK)
                    .local_private_key(&local.private)?
                    .remote_public_key(key)?
                    .prologue(PROLOGUE)?
                    .build_initiator()?,
                PATTERN_IK,
                params.encode(),
            ),
            None => (
                builder(NOISE_XX)
                    .local_private_key(&local.private)?
                    .prologue(PROLOGUE)?
                    .build_initiator()?,
                PATTERN_XX,
                Vec::new(),
            ),
        };
        let mut blob = vec![pattern];
        blob.extend(write(&mut hs, &payload)?);
        Ok((ClientHandshake { hs, params }, blob))
    }

    /// Takes the server's Handshake message.
    pub fn on_response(mut self, msg: &[u8]) -> Result<ClientDone, HandshakeError> {
        let payload = read(&mut self.hs, msg)?;
        let peer_params = TransportParams::decode(&payload)?;
        let final_message = if self.hs.is_handshake_finished() {
            None
        } else {
            Some(write(&mut self.hs, &self.params.encode())?)
        };
        Ok(ClientDone {
            established: finish(self.hs, &self.params, peer_params)?,
            final_message,
        })
    }
}

/// Whether an Initial's noise field opens an XX handshake.
pub fn is_xx(blob: &[u8]) -> bool {
    blob.first() == Some(&PATTERN_XX)
}

/// The server's side of an XX handshake waiting for the client's last message.
pub struct ServerHandshake {
    hs: snow::HandshakeState,
    params: TransportParams,
}

/// What the server does with a client's Initial.
pub enum ServerStep {
    /// IK: done; send `reply` in a Handshake packet.
    Done {
        reply: Vec<u8>,
        established: Box<Established>,
    },
    /// XX: send `reply`, then wait for the client's last message.
    AwaitFinal {
        reply: Vec<u8>,
        handshake: Box<ServerHandshake>,
    },
}

impl ServerHandshake {
    /// Answers the Initial's noise field with our parameters.
    pub fn accept(
        local: &Keypair,
        blob: &[u8],
        params: TransportParams,
    ) -> Result<ServerStep, HandshakeError> {
        let (&pattern, msg) = blob
            .split_first()
            .ok_or(HandshakeError::Malformed("empty Initial"))?;
        let name = match pattern {
            PATTERN_IK => NOISE_IK,
            PATTERN_XX => NOISE_XX,
            _ => return Err(HandshakeError::Malformed("unknown Noise pattern")),
        };
        let mut hs = builder(name)
            .local_private_key(&local.private)?
            .prologue(PROLOGUE)?
            .build_responder()?;
        let payload = read(&mut hs, msg)?;
        if pattern == PATTERN_IK {
            let peer_params = TransportParams::decode(&payload)?;
            let reply = write(&mut hs, &params.encode())?;
            return Ok(ServerStep::Done {
                reply,
                established: Box::new(finish(hs, &params, peer_params)?),
            });
        }
        let reply = write(&mut hs, &params.encode())?;
        Ok(ServerStep::AwaitFinal {
            reply,
            handshake: Box::new(ServerHandshake { hs, params }),
        })
    }

    /// Takes XX's third message.
    pub fn on_final(mut self, msg: &[u8]) -> Result<Established, HandshakeError> {
        let payload = read(&mut self.hs, msg)?;
        let peer_params = TransportParams::decode(&payload)?;
        finish(self.hs, &self.params, peer_params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(code: CodeKind) -> TransportParams {
        TransportParams {
            code,
            max_data: 1 << 20,
            max_stream_data: 1 << 19,
            max_blocks: 16,
            idle_timeout_ms: 30_000,
            receive_times: code == CodeKind::Rlnc,
            aes_gcm: code == CodeKind::Rlnc,
            prefix_repairs: code == CodeKind::Rlnc,
            start_pairs: code == CodeKind::Rlnc,
            max_streams: (code == CodeKind::Rlnc).then_some(100),
        }
    }

    #[test]
    fn transport_parameters_round_trip_and_flags_are_optional() {
        for code in [CodeKind::Rlnc, CodeKind::RaptorQ] {
            let p = params(code);
            assert_eq!(TransportParams::decode(&p.encode()).unwrap(), p);
        }
        // Without the trailing flags (an older peer): no receive times,
        // no AES-GCM.
        let mut old = TransportParams {
            max_streams: None,
            ..params(CodeKind::Rlnc)
        }
        .encode();
        old.pop();
        let p = TransportParams::decode(&old).unwrap();
        assert!(!p.receive_times && !p.aes_gcm && !p.prefix_repairs && !p.start_pairs);
        // Flag bits we do not know yet are ignored.
        let mut newer = old.clone();
        newer.extend_from_slice(&[0x40, 0x12]);
        let p = TransportParams::decode(&newer).unwrap();
        assert!(!p.receive_times && p.aes_gcm && !p.prefix_repairs && !p.start_pairs);
        assert_eq!(p.max_streams, None, "no stream limit from an older peer");
    }

    fn check_keys(a: &mut Established, b: &mut Established) {
        let mut body = b"ping".to_vec();
        body.extend_from_slice(&[0; 16]);
        a.send.seal(1, b"h", &mut body);
        let mut out = Vec::new();
        assert!(b.recv.open(1, false, b"h", &body, &mut out).is_ok());
        assert!(
            a.recv.open(1, false, b"h", &body, &mut out).is_err(),
            "directions use distinct keys"
        );
    }

    #[test]
    fn ik_and_xx_agree_on_keys_and_exchange_params() {
        let server = Keypair::generate();
        let client = Keypair::generate();
        for known in [true, false] {
            for (client_aes, server_aes) in [(true, true), (true, false), (false, true)] {
                let key = known.then_some(&server.public);
                let mut cp = params(CodeKind::Rlnc);
                cp.aes_gcm = client_aes;
                let mut sp = params(CodeKind::Rlnc);
                sp.aes_gcm = server_aes;
                let expected = Aead::negotiate(client_aes, server_aes);
                let (c, initial) = ClientHandshake::start(&client, key, cp).unwrap();
                let (mut client_end, mut server_end) =
                    match ServerHandshake::accept(&server, &initial, sp).unwrap() {
                        ServerStep::Done { reply, established } => {
                            assert!(known, "IK finishes in one round trip");
                            let done = c.on_response(&reply).unwrap();
                            assert!(done.final_message.is_none());
                            (done.established, *established)
                        }
                        ServerStep::AwaitFinal { reply, handshake } => {
                            assert!(!known, "XX needs the client's last message");
                            let done = c.on_response(&reply).unwrap();
                            let s = handshake
                                .on_final(done.final_message.as_ref().unwrap())
                                .unwrap();
                            (done.established, s)
                        }
                    };
                assert_eq!(client_end.peer_static, server.public);
                assert_eq!(server_end.peer_static, client.public);
                assert_eq!(server_end.peer_params, cp);
                assert_eq!(client_end.peer_params, sp);
                assert_eq!(
                    (server_end.send.aead(), client_end.send.aead()),
                    (expected, expected)
                );
                check_keys(&mut client_end, &mut server_end);
                check_keys(&mut server_end, &mut client_end);
            }
        }
    }

    #[test]
    fn ik_with_the_wrong_server_key_fails_at_the_server() {
        let server = Keypair::generate();
        let wrong = Keypair::generate();
        let (_, initial) = ClientHandshake::start(
            &Keypair::generate(),
            Some(&wrong.public),
            params(CodeKind::RaptorQ),
        )
        .unwrap();
        assert!(matches!(
            ServerHandshake::accept(&server, &initial, params(CodeKind::RaptorQ)),
            Err(HandshakeError::Noise(_))
        ));
    }

    #[test]
    fn garbage_is_refused() {
        let server = Keypair::generate();
        for blob in [&[][..], &[0][..], &[1, 2, 3][..], &[9; 100][..]] {
            assert!(ServerHandshake::accept(&server, blob, params(CodeKind::Rlnc)).is_err());
        }
        assert!(TransportParams::decode(&[7]).is_err());
    }
}
