//! The crafted client of `convoy bench hostile`: one endpoint on one
//! socket with many connections, sealing frames chosen as a hostile peer
//! would (`Connection::hostile_packet`), and the loop that runs one attack.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use convoy_proto::wire::cursor::Writer;
use convoy_proto::wire::frame::write_frame;
use convoy_proto::wire::{Frame, Symbol};
use convoy_proto::{CloseReason, CodeKind, Config, ConnectionHandle, Endpoint, Keypair, Mode};

pub(super) struct AttackOutcome {
    /// Connections that finished their handshake (the most at once).
    pub established: usize,
    /// Connections opened, with a fresh key for each round of `preauth`.
    pub opened: usize,
    pub closed: BTreeMap<u64, usize>,
    pub first_reason: Option<String>,
    pub packets: u64,
}

impl AttackOutcome {
    /// Adds a finished round's counts (a `preauth` attacker starts a new
    /// round, with a new key, once the server has closed every connection).
    fn absorb(&mut self, round: AttackOutcome) {
        self.established = self.established.max(round.established);
        self.opened += round.opened;
        for (code, n) in round.closed {
            *self.closed.entry(code).or_insert(0) += n;
        }
        if self.first_reason.is_none() {
            self.first_reason = round.first_reason;
        }
        self.packets += round.packets;
    }
}

/// The crafted client: one endpoint on one socket, `n` connections.
struct Attacker {
    sock: UdpSocket,
    ep: Endpoint,
    conns: Vec<ConnectionHandle>,
    t0: Instant,
    buf: Vec<u8>,
    rbuf: Vec<u8>,
    packets: u64,
}

impl Attacker {
    fn new(kp: Keypair, code: CodeKind) -> Result<Attacker> {
        // Another host than the honest vehicles' (127.0.0.1), as an
        // attacker is: the server holds back an address it closed for a
        // fault, and loopback's 127/8 gives each its own.
        let sock = UdpSocket::bind("127.0.0.2:0").context("attacker socket")?;
        sock.set_nonblocking(true)?;
        let mut cfg = Config::for_mode(kp, Mode::Tide).with_code(code);
        cfg.handshake_timeout = Duration::from_secs(3);
        let ep = Endpoint::new(cfg, false).map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(Attacker {
            sock,
            ep,
            conns: Vec::new(),
            t0: Instant::now(),
            buf: vec![0; 65_536],
            rbuf: vec![0; 65_536],
            packets: 0,
        })
    }

    fn now(&self) -> Duration {
        self.t0.elapsed()
    }

    /// Reads what arrived, runs timers and sends what the endpoint has.
    fn pump(&mut self) {
        let now = self.now();
        while let Ok((n, from)) = self.sock.recv_from(&mut self.rbuf) {
            self.ep.handle(now, from, &self.rbuf[..n]);
        }
        self.ep.handle_timeout(now);
        while let Some(t) = self.ep.poll_transmit(now, &mut self.buf) {
            let _ = self.sock.send_to(&self.buf[..t.len], t.remote);
        }
    }

    /// Seals `frames` for connection `h` and sends the packet.
    fn inject(&mut self, h: ConnectionHandle, frames: &[u8]) {
        let now = self.now();
        let Some(c) = self.ep.connection(h) else {
            return;
        };
        if !c.is_established() {
            return;
        }
        if let Some(t) = c.hostile_packet(now, frames, &mut self.buf) {
            let _ = self.sock.send_to(&self.buf[..t.len], t.remote);
            self.packets += 1;
        }
    }

    /// Whether every connection has ended (closed by the server, or timed
    /// out).
    fn all_closed(&self) -> bool {
        self.conns
            .iter()
            .all(|&h| self.ep.connection_ref(h).is_none_or(|c| c.is_closed()))
    }

    /// Whether, `after` into this attacker's life, no connection is
    /// established and still open while some were closed: the server has
    /// answered every handshake it was going to answer.
    fn refused_after(&self, after: Duration) -> bool {
        let mut closed = 0;
        for &h in &self.conns {
            match self.ep.connection_ref(h) {
                Some(c) if c.is_closed() => closed += 1,
                Some(c) if c.is_established() => return false,
                _ => {}
            }
        }
        closed > 0 && self.now() >= after
    }

    fn established(&mut self) -> usize {
        let hs = self.conns.clone();
        hs.iter()
            .filter(|&&h| {
                self.ep
                    .connection_ref(h)
                    .is_some_and(|c| c.peer_static().is_some())
            })
            .count()
    }

    fn outcome(&self) -> AttackOutcome {
        let mut closed = BTreeMap::new();
        let mut first_reason = None;
        for &h in &self.conns {
            if let Some(CloseReason::Peer { code, reason }) =
                self.ep.connection_ref(h).and_then(|c| c.close_reason())
            {
                *closed.entry(*code).or_insert(0) += 1;
                first_reason.get_or_insert_with(|| reason.clone());
            }
        }
        AttackOutcome {
            established: 0,
            opened: self.conns.len(),
            closed,
            first_reason,
            packets: self.packets,
        }
    }
}

/// A coded block of one source symbol holding `content` (frames as a
/// block carries them), as a SYMBOL frame.
fn one_symbol_block(block_id: u32, content: &[u8], out: &mut Vec<u8>) {
    let mut buf = vec![0u8; content.len() + 32];
    let mut w = Writer::new(&mut buf);
    write_frame(
        &mut w,
        &Frame::Symbol(Symbol {
            block_id,
            esi: 0,
            block_len: Some(content.len() as u32),
            prefix: None,
            payload: content,
        }),
    )
    .expect("sized for it");
    out.extend_from_slice(w.into_written());
}

fn frame_bytes(frame: &Frame<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let mut w = Writer::new(&mut buf);
    write_frame(&mut w, frame).expect("small frame");
    w.into_written().to_vec()
}

/// Opens `n` connections to `target` and runs `attack` from them for at
/// least `seconds` and until `stop` is set (when the honest uploads it
/// runs beside are done).
pub(super) fn attack_run(
    attack: &'static str,
    target: SocketAddr,
    public: [u8; 32],
    rogue: Keypair,
    n: usize,
    seconds: f64,
    stop: Arc<AtomicBool>,
) -> Result<AttackOutcome> {
    // Who attacks: the registered rogue vehicle, or (preauth) keys the
    // registry has never seen, half over XX (no server key needed).
    let code = match attack {
        "blocks" | "preauth" => CodeKind::RaptorQ,
        _ => CodeKind::Rlnc,
    };
    let connect = |key: Keypair| -> Result<Attacker> {
        let mut a = Attacker::new(key, code)?;
        for i in 0..n {
            let now = a.now();
            let server_key = (attack != "preauth" || i % 2 == 0).then_some(&public);
            let h =
                a.ep.connect(now, target, server_key)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            a.conns.push(h);
        }
        Ok(a)
    };
    // Each round's key: the rogue's, or a new one the registry never saw.
    let key = || {
        if attack == "preauth" {
            Keypair::generate()
        } else {
            rogue.clone()
        }
    };
    let mut a = connect(key())?;
    let mut past = AttackOutcome {
        established: 0,
        opened: 0,
        closed: BTreeMap::new(),
        first_reason: None,
        packets: 0,
    };
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    // Per connection: the next block id, stream id and offset it uses.
    let mut next_block = vec![0u32; n];
    let mut next_stream = vec![0u64; n];
    let mut next_offset = vec![1u64; n];
    let mut blocks_sent = vec![false; n];
    let mut reset_sent = vec![false; n];
    let mut established = 0;
    let mut frames = Vec::with_capacity(2048);
    let symbol = vec![0x5au8; 1400];
    let zeros = vec![0u8; 1400];
    while Instant::now() < end || !stop.load(Ordering::SeqCst) {
        a.pump();
        established = established.max(a.established());
        // A persistent attacker: once the server has closed or refused
        // every connection of a round, it comes back with as many (the
        // rogue with its key, preauth with a fresh key, so the server pays
        // the handshake's key exchanges and a registry lookup again), for
        // as long as the attack lasts. The XX half of preauth is refused
        // without an answer and would only time out: a round also ends
        // once no connection is left open 500 ms into it.
        if a.all_closed() || a.refused_after(Duration::from_millis(500)) {
            let mut round = a.outcome();
            round.established = established;
            past.absorb(round);
            a = connect(key())?;
            next_block = vec![0; n];
            next_stream = vec![0; n];
            next_offset = vec![1; n];
            blocks_sent = vec![false; n];
            reset_sent = vec![false; n];
            established = 0;
        }
        for i in 0..n {
            let h = a.conns[i];
            let established_now = a.ep.connection_ref(h).is_some_and(|c| c.is_established());
            if !established_now {
                continue;
            }
            // The server reads nothing but 8 datagrams of a connection
            // until the registry has answered about its key, and drops the
            // rest: a registered attacker that wants its packets read waits
            // until the server answers its first ones (it reads them only
            // once authorized). A key the registry does not know gains
            // nothing by waiting.
            let heard =
                a.ep.connection_ref(h)
                    .is_some_and(|c| c.stats().packets_received > 0);
            if attack != "preauth" && !heard {
                continue;
            }
            frames.clear();
            match attack {
                // One symbol of each of 32 maximal RaptorQ blocks (K =
                // 56,403 symbols of 1,400 bytes: 79 MB a block), sent
                // once per connection: the ~30-datagram attack.
                "blocks" | "preauth" => {
                    if blocks_sent[i] {
                        continue;
                    }
                    blocks_sent[i] = true;
                    for b in 0..32u32 {
                        frames.clear();
                        write_symbol(&mut frames, b, 1, Some(56_403 * 1400), &zeros);
                        let f = frames.clone();
                        a.inject(h, &f);
                    }
                    continue;
                }
                // Zero-length STREAM frames, each opening a new stream.
                "streams" => {
                    let mut content = Vec::with_capacity(1400);
                    while content.len() < 1300 {
                        let id = next_stream[i] * 2;
                        next_stream[i] += 1;
                        content.extend(frame_bytes(&Frame::Stream {
                            stream: id,
                            offset: 0,
                            fin: false,
                            data: &[],
                        }));
                    }
                    one_symbol_block(next_block[i], &content, &mut frames);
                }
                // 1,000-byte pieces of stream 0 at offsets 2,000, 4,000,
                // ..., never offset 0, with a gap after each so that no two
                // join (overlapping or adjoining pieces are held as one).
                "pieces" => {
                    let content = frame_bytes(&Frame::Stream {
                        stream: 0,
                        offset: next_offset[i] * 2000,
                        fin: false,
                        data: &symbol[..1000],
                    });
                    next_offset[i] += 1;
                    one_symbol_block(next_block[i], &content, &mut frames);
                }
                // A reset claiming a final size far beyond every limit,
                // then data on other streams.
                "reset" => {
                    let content = if !reset_sent[i] {
                        reset_sent[i] = true;
                        frame_bytes(&Frame::ResetStream {
                            stream: 0,
                            final_size: (1 << 62) - 1,
                            code: 0,
                        })
                    } else {
                        let id = 2 + next_stream[i] % 50 * 2;
                        next_stream[i] += 1;
                        frame_bytes(&Frame::Stream {
                            stream: id,
                            offset: next_offset[i] * 1000,
                            fin: false,
                            data: &symbol[..1000],
                        })
                    };
                    next_offset[i] += 1;
                    one_symbol_block(next_block[i], &content, &mut frames);
                }
                // Sources that never name their block's K (a SOURCE frame
                // leaves it to the block's first source and its repairs,
                // which never come), 200 to a block, block after block:
                // the receiver would hold them for ever.
                "held" => {
                    let n = next_block[i];
                    write_symbol(&mut frames, n / 200, n % 200 + 1, None, &zeros);
                }
                _ => unreachable!("attacks are checked"),
            }
            next_block[i] += 1;
            let f = frames.clone();
            a.inject(h, &f);
        }
        // About 1,000 crafted packets per second per connection at most:
        // bounded, and still far beyond what the server allows.
        std::thread::sleep(Duration::from_millis(1));
    }
    // Let the server's last words (close frames) arrive.
    let settle = Instant::now() + Duration::from_millis(300);
    while Instant::now() < settle {
        a.pump();
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut last = a.outcome();
    last.established = established;
    past.absorb(last);
    Ok(past)
}

fn write_symbol(
    out: &mut Vec<u8>,
    block_id: u32,
    esi: u32,
    block_len: Option<u32>,
    payload: &[u8],
) {
    let mut buf = vec![0u8; payload.len() + 32];
    let mut w = Writer::new(&mut buf);
    write_frame(
        &mut w,
        &Frame::Symbol(Symbol {
            block_id,
            // Not the block's first source, so it is not read in order as
            // frames: only the decoder takes it.
            esi,
            block_len,
            prefix: None,
            payload,
        }),
    )
    .expect("sized for it");
    out.extend_from_slice(w.into_written());
}
