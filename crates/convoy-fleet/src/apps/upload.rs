//! Bulk uploads over LTE with the real convoy-proto: a client endpoint on
//! the vehicle, a server endpoint in the cloud (one per upload, because an
//! endpoint's timer and output polls walk all its connections), the Noise
//! handshake, ChaCha20-Poly1305 on every packet, coded blocks and the rate
//! controller, all in virtual time. Content is generated from the offset
//! (nothing is stored), blocks are small (16 symbols, 8 in flight) and the
//! stream buffers are 64 KiB, so an upload costs a few hundred KiB.
//!
//! Snow draws its ephemeral keys from the OS, so ciphertexts differ from
//! run to run; only lengths and times reach the records, and those are the
//! same (tests/determinism.rs).

use std::net::SocketAddr;
use std::time::Duration;

use convoy_models::Rng;
use convoy_proto::stream::StreamLimits;
use convoy_proto::{
    Config, ConnectionHandle, Endpoint, Event, Keypair, Mode, StreamError, StreamId,
};

use super::between;
use crate::events::{Nanos, SEC};
use crate::packet::{Body, Packet, Server};
use crate::scenario::UploadSpec;
use crate::world::{Ev, World};

const SERVER: &str = "192.0.2.1:443";
const CLIENT: &str = "10.0.0.2:40000";

pub struct Session {
    client: Endpoint,
    server: Endpoint,
    ch: ConnectionHandle,
    sh: Option<ConnectionHandle>,
    out: Option<StreamId>,
    finished: bool,
    sent: u64,
    read: u64,
}

#[cfg(test)]
mod tests {
    #[test]
    fn content_is_the_same_from_any_offset() {
        let mut whole = vec![0u8; 100];
        super::content(7, 3, &mut whole);
        let mut part = vec![0u8; 50];
        super::content(7, 40, &mut part);
        assert_eq!(&whole[37..87], &part[..]);
        let mut other = vec![0u8; 100];
        super::content(8, 3, &mut other);
        assert_ne!(whole, other);
    }
}

#[derive(Clone, Debug)]
pub struct UploadRec {
    pub vehicle: u32,
    pub index: u32,
    pub started: Nanos,
    pub connected: Option<Nanos>,
    pub done: Option<Nanos>,
    pub bytes_read: u64,
    pub corrupt: bool,
}

pub struct Uploads {
    spec: UploadSpec,
    mode: Mode,
    server_key: Keypair,
    uploader: Vec<Option<bool>>,
    current: Vec<Option<u32>>,
    sessions: Vec<Option<Box<Session>>>,
    timers: Vec<Nanos>,
    pub recs: Vec<UploadRec>,
    count: Vec<u32>,
    buf: Vec<u8>,
    check: Vec<u8>,
}

/// The fleet's protocol configuration: the mode's defaults with small
/// blocks and buffers (documented in docs/SIM.md).
pub fn fleet_config(keypair: Keypair, mode: Mode, seed: u64) -> Config {
    let mut c = Config::for_mode(keypair, mode);
    c.coding.block_symbols = 16;
    c.coding.window = 8;
    c.streams = StreamLimits {
        max_data: 1 << 20,
        max_stream_data: 512 << 10,
        send_buffer: 64 << 10,
        ..StreamLimits::default()
    };
    c.seed = Some(seed);
    c
}

/// The upload's content at `offset`: a keyed byte pattern any offset
/// regenerates (SplitMix64 of the 8-byte word index).
fn content(upload: u32, offset: u64, out: &mut [u8]) {
    let word = |w: u64| {
        let mut z = w ^ (u64::from(upload) << 40) ^ 0x9e37_79b9_7f4a_7c15;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)).to_le_bytes()
    };
    let mut k = 0;
    while k < out.len() {
        let o = offset + k as u64;
        let bytes = word(o / 8);
        let from = (o % 8) as usize;
        let n = (8 - from).min(out.len() - k);
        out[k..k + n].copy_from_slice(&bytes[from..from + n]);
        k += n;
    }
}

impl Uploads {
    pub fn new(w: &World) -> Result<Uploads, String> {
        let spec = w.sc.upload.clone().expect("upload");
        let mode: Mode = spec.mode.parse()?;
        let key = Keypair::generate();
        fleet_config(key.clone(), mode, 0).validate()?;
        Ok(Uploads {
            spec,
            mode,
            server_key: key,
            uploader: vec![None; w.vehicles],
            current: vec![None; w.vehicles],
            sessions: Vec::new(),
            timers: Vec::new(),
            recs: Vec::new(),
            count: vec![0; w.vehicles],
            buf: vec![0; 16 << 10],
            check: vec![0; 16 << 10],
        })
    }

    pub fn active(&self) -> usize {
        self.sessions.iter().filter(|s| s.is_some()).count()
    }
}

fn d(n: Nanos) -> Duration {
    Duration::from_nanos(n)
}

impl World {
    pub(crate) fn upload_arrive(&mut self, i: u32) {
        let now = self.now;
        let key = self.mob.vehicles()[i as usize].key.clone();
        let u = self.uploads.as_mut().expect("uploads");
        let mut rng = Rng::fork(self.seed, &format!("upload/{key}"));
        let is = *u.uploader[i as usize].get_or_insert_with(|| rng.uniform() < u.spec.share);
        if is && u.current[i as usize].is_none() {
            let at = now + (between(&mut rng, 0.0, u.spec.start_spread_s) * SEC as f64) as Nanos;
            self.q.push(at, Ev::UploadStart(i));
        }
    }

    pub(crate) fn upload_depart(&mut self, i: u32) {
        let u = self.uploads.as_mut().expect("uploads");
        if let Some(k) = u.current[i as usize].take() {
            u.sessions[k as usize] = None;
        }
    }

    pub(crate) fn on_upload_start(&mut self, i: u32) {
        let now = self.now;
        if !self.nodes[i as usize].present || self.lte.as_ref().is_none_or(|l| !l.is_attached(i)) {
            return;
        }
        let seed = self.seed;
        let u = self.uploads.as_mut().expect("uploads");
        if u.current[i as usize].is_some() {
            return;
        }
        let k = u.sessions.len() as u32;
        let session_seed = seed ^ (u64::from(k) << 20) ^ 0xc0ff_ee00;
        let server_cfg = fleet_config(u.server_key.clone(), u.mode, session_seed);
        let client_cfg = fleet_config(Keypair::generate(), u.mode, session_seed ^ 1);
        let (Ok(mut client), Ok(server)) = (
            Endpoint::new(client_cfg, false),
            Endpoint::new(server_cfg, true),
        ) else {
            return;
        };
        let server_pub = u.server_key.public;
        let Ok(ch) = client.connect(d(now), SERVER.parse().expect("addr"), Some(&server_pub))
        else {
            return;
        };
        u.sessions.push(Some(Box::new(Session {
            client,
            server,
            ch,
            sh: None,
            out: None,
            finished: false,
            sent: 0,
            read: 0,
        })));
        u.timers.push(Nanos::MAX);
        u.recs.push(UploadRec {
            vehicle: i,
            index: u.count[i as usize],
            started: now,
            connected: None,
            done: None,
            bytes_read: 0,
            corrupt: false,
        });
        u.count[i as usize] += 1;
        u.current[i as usize] = Some(k);
        self.upload_drive(k);
    }

    pub(crate) fn on_proto_timer(&mut self, k: u32) {
        let now = self.now;
        let u = self.uploads.as_mut().expect("uploads");
        if u.timers[k as usize] != now {
            return;
        }
        u.timers[k as usize] = Nanos::MAX;
        let Some(s) = u.sessions[k as usize].as_mut() else {
            return;
        };
        s.client.handle_timeout(d(now));
        s.server.handle_timeout(d(now));
        self.upload_drive(k);
    }

    pub(crate) fn upload_server_receive(&mut self, p: Packet) {
        let Body::Proto { upload, bytes } = p.body else {
            return;
        };
        let now = self.now;
        let u = self.uploads.as_mut().expect("uploads");
        let Some(s) = u.sessions[upload as usize].as_mut() else {
            return;
        };
        s.server
            .handle(d(now), CLIENT.parse::<SocketAddr>().expect("addr"), &bytes);
        self.upload_drive(upload);
    }

    pub(crate) fn upload_client_receive(&mut self, p: Packet) {
        let Body::Proto { upload, bytes } = p.body else {
            return;
        };
        let now = self.now;
        let u = self.uploads.as_mut().expect("uploads");
        let Some(s) = u.sessions[upload as usize].as_mut() else {
            return;
        };
        s.client
            .handle(d(now), SERVER.parse::<SocketAddr>().expect("addr"), &bytes);
        self.upload_drive(upload);
    }

    /// Runs both applications, sends what both endpoints have to send and
    /// re-arms the session's timer.
    fn upload_drive(&mut self, k: u32) {
        let now = self.now;
        let u = self.uploads.as_mut().expect("uploads");
        let total = u.spec.bytes;
        let rec = &mut u.recs[k as usize];
        let vehicle = rec.vehicle;
        let Some(s) = u.sessions[k as usize].as_mut() else {
            return;
        };
        let buf = &mut u.buf;
        let check = &mut u.check;
        // Client: write the content as credit allows, then finish.
        if let Some(c) = s.client.connection(s.ch) {
            while let Some(e) = c.poll_event() {
                if e == Event::Connected && rec.connected.is_none() {
                    rec.connected = Some(now);
                }
            }
            if c.is_established() && !s.finished {
                if s.out.is_none() {
                    s.out = c.open_stream().ok();
                }
                if let Some(id) = s.out {
                    while s.sent < total {
                        let room = c.write_room(id).min(buf.len());
                        if room == 0 {
                            break;
                        }
                        let n = (total - s.sent).min(room as u64) as usize;
                        content(k, s.sent, &mut buf[..n]);
                        match c.write(id, &buf[..n]) {
                            Ok(w) => s.sent += w as u64,
                            Err(_) => break,
                        }
                    }
                    if s.sent == total && c.finish(id).is_ok() {
                        s.finished = true;
                    }
                }
            }
        }
        // Server: accept, read and check every byte.
        if s.sh.is_none() {
            s.sh = s.server.accept();
        }
        let mut complete = false;
        if let Some(c) = s.sh.and_then(|h| s.server.connection(h)) {
            while c.poll_event().is_some() {}
            while c.accept_stream().is_some() {}
            loop {
                match c.read(StreamId(0), buf) {
                    Ok(0) => {
                        complete = s.read == total;
                        break;
                    }
                    Ok(n) => {
                        content(k, s.read, &mut check[..n]);
                        if check[..n] != buf[..n] {
                            rec.corrupt = true;
                        }
                        s.read += n as u64;
                    }
                    Err(StreamError::Blocked) | Err(_) => break,
                }
            }
            rec.bytes_read = s.read;
        }
        // Datagrams both ways.
        let mut up = Vec::new();
        let mut down = Vec::new();
        let mut dg = [0u8; 1500];
        while let Some(t) = s.client.poll_transmit(d(now), &mut dg) {
            up.push(dg[..t.len].to_vec());
        }
        while let Some(t) = s.server.poll_transmit(d(now), &mut dg) {
            down.push(dg[..t.len].to_vec());
        }
        let next = [s.client.poll_timeout(), s.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .map(|t| (t.as_nanos() as Nanos).max(now));
        if complete {
            rec.done = Some(now);
            u.sessions[k as usize] = None;
            u.current[vehicle as usize] = None;
            self.q.push(now + SEC, Ev::UploadStart(vehicle));
        } else if let Some(t) = next {
            if t < u.timers[k as usize] || u.timers[k as usize] < now {
                u.timers[k as usize] = t;
                self.q.push(t, Ev::ProtoTimer(k));
            }
        }
        for bytes in up {
            let len = bytes.len();
            self.lte_up(
                vehicle,
                Packet::up(Server::Cloud, len, Body::Proto { upload: k, bytes }),
            );
        }
        for bytes in down {
            let len = bytes.len();
            self.lte_down(
                Server::Cloud,
                Packet::down(vehicle, len, Body::Proto { upload: k, bytes }),
            );
        }
    }
}
