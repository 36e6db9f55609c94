//! 802.11p (and, for clustered VANETs, Wi-Fi) as a shared medium per
//! channel: CSMA/CA with backoff, airtime from the frame length at
//! 6 Mbit/s in 10 MHz, reception by the Nakagami PDR of convoy-models with
//! building shadowing, collisions by capture, half duplex, and unicast
//! acknowledgements with retries. Everything is decided at the end of a
//! transmission, from the transmissions that overlapped it.

use std::collections::VecDeque;

use convoy_ave::Vec2;
use convoy_models::dsrc::{Dsrc, DsrcPreset};
use convoy_models::Rng;

use crate::city::City;
use crate::events::Nanos;
use crate::scenario::RadioSpec;

const US: Nanos = 1_000;
const SLOT: Nanos = 13 * US;
const SIFS: Nanos = 32 * US;
/// AC_BE: AIFSN 6 (IEEE 802.11p EDCA).
const AIFS: Nanos = SIFS + 6 * SLOT;
const CW_MIN: u16 = 15;
const MARGIN_MIN: f64 = -60.0;
const MARGIN_STEP: f64 = 0.01;
const MARGIN_STEPS: usize = 10_001;
const CW_MAX: u16 = 1023;
/// 802.11 MAC header + LLC/SNAP + FCS around our payload.
const MAC_OVERHEAD: usize = 36;

/// Airtime of a frame with `payload` bytes at 6 Mbit/s in a 10 MHz channel:
/// 32 µs preamble, 8 µs SIGNAL, 8 µs OFDM symbols of 48 data bits.
pub fn airtime(payload: usize) -> Nanos {
    let bits = 16 + 6 + 8 * (payload + MAC_OVERHEAD);
    40 * US + bits.div_ceil(48) as Nanos * 8 * US
}

/// Who a frame belongs to, so the receiver hands it to the right layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    Routing,
    Cluster,
}

#[derive(Clone, Debug)]
pub struct OutFrame {
    pub to: Option<u32>,
    pub bytes: Vec<u8>,
    pub token: u64,
    pub owner: Owner,
}

#[derive(Default)]
pub struct Mac {
    pub queue: VecDeque<OutFrame>,
    busy: bool,
    cw: u16,
    retries: u8,
    tx: Option<u64>,
}

#[derive(Clone, Copy)]
struct Tx {
    id: u64,
    node: u32,
    chan: u8,
    pos: Vec2,
    start: Nanos,
    end: Nanos,
}

pub struct Medium {
    pub dsrc: Dsrc,
    pdr: Vec<f64>,
    /// PDR against the fading margin (threshold − mean received power, dB),
    /// every MARGIN_STEP dB from MARGIN_MIN: the closed form costs an
    /// incomplete gamma function, far too slow per reception.
    by_margin: Vec<f64>,
    pub max_range_m: f64,
    cs_range_m: f64,
    /// d_interferer / d_signal at and beyond which a frame survives.
    capture_ratio: f64,
    pub retry_limit: u8,
    txs: Vec<Tx>,
    next_id: u64,
    longest: Nanos,
    rng: Rng,
    pub frames_sent: u64,
    pub receptions: u64,
    pub collisions: u64,
}

/// What the end of a transmission did.
pub struct TxOutcome {
    pub node: u32,
    pub frame: OutFrame,
    /// Receivers that got the frame.
    pub received: Vec<u32>,
    pub ack: Ack,
}

/// How a transmission ended for its sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ack {
    Broadcast,
    Acked,
    /// The retry limit was reached.
    Failed,
    /// Not acknowledged; the frame stays queued for another attempt.
    Retrying,
}

impl Medium {
    pub fn new(spec: &RadioSpec, seed: u64) -> Result<Medium, String> {
        let preset = match spec.model.as_str() {
            "vehicles-as-obstacles" => DsrcPreset::VehiclesAsObstacles,
            "los" => DsrcPreset::LineOfSight,
            m => {
                return Err(format!(
                    "radio.model {m:?}: use vehicles-as-obstacles or los"
                ))
            }
        };
        let mut dsrc = Dsrc::preset(preset);
        if let Some(m) = spec.nakagami_m {
            dsrc.m = m;
        }
        if let Some(a) = spec.alpha {
            dsrc.alpha = a;
        }
        if let Some(p) = spec.tx_power_dbm {
            dsrc.tx_power_dbm = p;
        }
        let dsrc = dsrc.validated().map_err(|e| e.to_string())?;
        // Beyond the distance where half a percent of frames arrive, none do.
        let max_range_m = dsrc.range_at(0.005).max(1.0);
        let pdr = (0..=max_range_m.ceil() as usize)
            .map(|d| dsrc.pdr(d as f64))
            .collect();
        let by_margin = (0..MARGIN_STEPS)
            .map(|k| {
                let margin = MARGIN_MIN + k as f64 * MARGIN_STEP;
                convoy_models::math::gamma_q(dsrc.m, dsrc.m * 10f64.powf(margin / 10.0))
            })
            .collect();
        let mut cs = 1.0;
        while dsrc.mean_rx_power_dbm(cs, 0.0) >= spec.cca_dbm && cs < 1e5 {
            cs *= 1.01;
        }
        Ok(Medium {
            capture_ratio: 10f64.powf(spec.capture_db / (10.0 * dsrc.alpha)),
            dsrc,
            pdr,
            by_margin,
            max_range_m,
            cs_range_m: cs,
            retry_limit: spec.retry_limit,
            txs: Vec::new(),
            next_id: 0,
            longest: airtime(2304) + SIFS + airtime(0),
            rng: Rng::fork(seed, "802.11p"),
            frames_sent: 0,
            receptions: 0,
            collisions: 0,
        })
    }

    /// The "theoretical maximum range" of AVE's neighbour filter: where the
    /// mean received power (path loss, no fading) falls to the receive
    /// threshold. Beyond it only lucky fades get through.
    pub fn nominal_range_m(&self) -> f64 {
        let mut d = 1.0;
        while self.dsrc.mean_rx_power_dbm(d, 0.0) >= self.dsrc.threshold_dbm() && d < 1e5 {
            d *= 1.001;
        }
        d
    }

    pub fn cs_range_m(&self) -> f64 {
        self.cs_range_m
    }

    fn backoff(&mut self, cw: u16) -> Nanos {
        AIFS + (self.rng.uniform() * f64::from(cw + 1)) as Nanos * SLOT
    }

    /// Queues a frame; returns when to try the medium, if the MAC was idle.
    pub fn enqueue(&mut self, mac: &mut Mac, now: Nanos, f: OutFrame) -> Option<Nanos> {
        mac.queue.push_back(f);
        if mac.busy {
            return None;
        }
        mac.busy = true;
        mac.cw = CW_MIN;
        Some(now + self.backoff(mac.cw))
    }

    fn prune(&mut self, now: Nanos) {
        let keep_after = now.saturating_sub(self.longest);
        self.txs.retain(|t| t.end > keep_after);
    }

    /// The medium as sensed at `pos` on `chan`: busy until when, if busy.
    fn busy_until(&self, now: Nanos, pos: Vec2, chan: u8) -> Option<Nanos> {
        self.txs
            .iter()
            .filter(|t| {
                t.chan == chan
                    && t.start <= now
                    && now < t.end
                    && t.pos.dist(pos) <= self.cs_range_m
            })
            .map(|t| t.end)
            .max()
    }

    /// The MAC's access time came: start sending, or defer. Returns
    /// `(event time, Some(tx id))` for a transmission end, `(time, None)`
    /// for the next access attempt.
    pub fn access(
        &mut self,
        mac: &mut Mac,
        node: u32,
        chan: u8,
        pos: Vec2,
        now: Nanos,
    ) -> Option<(Nanos, Option<u64>)> {
        let f = mac.queue.front()?;
        self.prune(now);
        if let Some(until) = self.busy_until(now, pos, chan) {
            let b = self.backoff(mac.cw);
            return Some((until + b, None));
        }
        let mut dur = airtime(f.bytes.len());
        if f.to.is_some() {
            dur += SIFS + airtime(0); // the ACK
        }
        let id = self.next_id;
        self.next_id += 1;
        self.txs.push(Tx {
            id,
            node,
            chan,
            pos,
            start: now,
            end: now + dur,
        });
        mac.tx = Some(id);
        self.frames_sent += 1;
        Some((now + dur, Some(id)))
    }

    /// PDR with `extra_db` of shadowing, interpolated in the margin table.
    fn pdr_shadowed(&self, d: f64, extra_db: f64) -> f64 {
        let margin = self.dsrc.threshold_dbm() - self.dsrc.mean_rx_power_dbm(d, extra_db);
        let x = (margin - MARGIN_MIN) / MARGIN_STEP;
        if x <= 0.0 {
            return self.by_margin[0];
        }
        let i = x.floor() as usize;
        if i + 1 >= self.by_margin.len() {
            return 0.0;
        }
        let f = x - i as f64;
        self.by_margin[i] * (1.0 - f) + self.by_margin[i + 1] * f
    }

    /// PDR at distance d (metres) from the precomputed table.
    fn pdr_at(&self, d: f64) -> f64 {
        let i = d.round() as usize;
        self.pdr.get(i).copied().unwrap_or(0.0)
    }

    /// Decides who received transmission `id` of `node`. `candidates` are
    /// the nodes near the sender with their positions and channels.
    #[allow(clippy::too_many_arguments)]
    pub fn finish(
        &mut self,
        mac: &mut Mac,
        node: u32,
        id: u64,
        now: Nanos,
        candidates: &[(u32, Vec2, u8)],
        city: &mut City,
    ) -> Option<(Nanos, TxOutcome)> {
        let tx = *self.txs.iter().find(|t| t.id == id)?;
        mac.tx = None;
        let frame = mac.queue.front()?.clone();
        let mut received = Vec::new();
        for &(r, rpos, rchan) in candidates {
            if r == node || rchan != tx.chan {
                continue;
            }
            if let Some(to) = frame.to {
                if to != r {
                    continue;
                }
            }
            if self.hears(&tx, r, rpos, city) {
                received.push(r);
            }
        }
        let ack = match frame.to {
            None => Ack::Broadcast,
            Some(_) if !received.is_empty() => Ack::Acked,
            Some(_) if mac.retries + 1 < self.retry_limit => {
                mac.retries += 1;
                mac.cw = (mac.cw * 2 + 1).min(CW_MAX);
                let at = now + self.backoff(mac.cw);
                let outcome = TxOutcome {
                    node,
                    frame,
                    received,
                    ack: Ack::Retrying,
                };
                return Some((at, outcome));
            }
            Some(_) => Ack::Failed,
        };
        mac.queue.pop_front();
        mac.retries = 0;
        mac.cw = CW_MIN;
        let at = if mac.queue.is_empty() {
            mac.busy = false;
            Nanos::MAX
        } else {
            now + self.backoff(mac.cw)
        };
        Some((
            at,
            TxOutcome {
                node,
                frame,
                received,
                ack,
            },
        ))
    }

    fn hears(&mut self, tx: &Tx, r: u32, rpos: Vec2, city: &mut City) -> bool {
        let d = tx.pos.dist(rpos);
        if d > self.max_range_m {
            return false;
        }
        // Fading and obstacles first (one uniform draw against the PDR).
        let u = self.rng.uniform();
        if u >= self.pdr_at(d) {
            return false;
        }
        if !city.is_empty() {
            let db = city.shadow_db(tx.pos, rpos);
            if db > 0.0 && u >= self.pdr_shadowed(d, db) {
                return false;
            }
        }
        // Then the medium. Half duplex: a receiver sending at any moment
        // of the frame misses it. Capture: an overlapping frame not weaker
        // by the capture margin destroys it.
        let d_min_interferer = d * self.capture_ratio;
        for o in &self.txs {
            if o.id == tx.id || o.chan != tx.chan || o.end <= tx.start || o.start >= tx.end {
                continue;
            }
            if o.node == r || o.pos.dist(rpos) < d_min_interferer {
                self.collisions += 1;
                return false;
            }
        }
        self.receptions += 1;
        true
    }

    /// Forgets a node's MAC state (it left the map).
    pub fn forget(&mut self, mac: &mut Mac) {
        mac.queue.clear();
        mac.busy = false;
        mac.tx = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn airtime_of_a_beacon_and_a_full_frame() {
        // 100 B: (22 + 8·136)/48 → 24 symbols → 40 + 192 = 232 µs.
        assert_eq!(airtime(100), 232 * US);
        assert!(airtime(1500) > 2 * 1000 * US);
    }

    #[test]
    fn margin_table_matches_the_closed_form() {
        let m = Medium::new(&RadioSpec::default(), 1).unwrap();
        for (d, db) in [(50.0, 9.0), (120.0, 3.3), (300.0, 18.0), (20.0, 40.0)] {
            let exact = m.dsrc.pdr_shadowed(d, db);
            assert!(
                (m.pdr_shadowed(d, db) - exact).abs() < 1e-3,
                "{d} {db}: {exact}"
            );
        }
    }

    #[test]
    fn ranges_follow_the_channel_model() {
        let m = Medium::new(&RadioSpec::default(), 1).unwrap();
        assert!(
            m.max_range_m > 300.0 && m.max_range_m < 3000.0,
            "{}",
            m.max_range_m
        );
        assert!(m.cs_range_m() > 100.0, "{}", m.cs_range_m());
        let r = m.nominal_range_m();
        assert!(r > 300.0 && r < m.max_range_m, "{r}");
        println!(
            "max {} nominal {r} carrier sense {}",
            m.max_range_m,
            m.cs_range_m()
        );
    }
}
