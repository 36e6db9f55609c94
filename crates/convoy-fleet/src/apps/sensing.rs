//! Crowd sensing over AVE (SPEC S7): every vehicle runs a router; senders
//! emit bursts of bundles at random points of their trips; RSUs run
//! routers that deliver to the cloud. Records each bundle's fate.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use convoy_ave::{
    Config, DropCause, Protocol, Role, Router, RouterEvent, RsuTable, Strategy, Vec2,
};
use convoy_models::Rng;

use super::exponential;
use crate::events::{Nanos, MS, SEC};
use crate::scenario::SensingSpec;
use crate::world::{Ev, World};

#[derive(Clone, Debug, Default)]
pub struct BundleRec {
    pub created: Nanos,
    pub delivered: Option<Nanos>,
    pub hops: u8,
    pub cause: Option<DropCause>,
    /// Every acknowledged hop of every copy, in order: the strategy's
    /// initial (L local, R reactive, G geographic, C carry).
    pub path: String,
}

pub struct Sensing {
    pub protocol: Protocol,
    pub cfg: Config,
    spec: SensingSpec,
    rsus: Arc<RsuTable>,
    stop: Nanos,
    rngs: Vec<Option<Rng>>,
    /// (origin vehicle, bundle number) → its fate.
    pub bundles: BTreeMap<(u32, u32), BundleRec>,
    /// Hops travelled per strategy (1..=4): the thesis's SUR.
    pub sur: [u64; 5],
}

impl Sensing {
    pub fn new(w: &World) -> Result<Sensing, String> {
        let spec = w.sc.sensing.clone().expect("sensing");
        let mut protocol: Protocol = spec.protocol.parse()?;
        if let (Protocol::SprayAndWait { copies }, Some(c)) = (&mut protocol, spec.spray_copies) {
            *copies = c;
        }
        let mut cfg = Config::new(protocol);
        cfg.max_range_m = w.medium.nominal_range_m();
        if let Some(d) = spec.d_th_m {
            cfg.d_th_m = d;
        }
        cfg.validate()?;
        let stop = spec.stop_s.map_or(w.end, |s| (s * SEC as f64) as Nanos);
        Ok(Sensing {
            protocol,
            cfg,
            rsus: Arc::new(RsuTable::new(w.rsu_ids())),
            stop,
            rngs: vec![None; w.vehicles],
            bundles: BTreeMap::new(),
            sur: [0; 5],
            spec,
        })
    }

    pub fn on_event(&mut self, now: Nanos, e: RouterEvent) {
        match e {
            RouterEvent::Delivered {
                origin,
                bundle,
                hops,
                ..
            } => {
                if let Some(b) = self.bundles.get_mut(&(origin - 1, bundle)) {
                    if b.delivered.is_none() {
                        b.delivered = Some(now);
                        b.hops = hops;
                    }
                }
            }
            RouterEvent::Hop {
                origin,
                bundle,
                strategy,
            } => {
                self.sur[strategy as usize] += 1;
                if let Some(b) = self.bundles.get_mut(&(origin - 1, bundle)) {
                    b.path.push(match strategy {
                        Strategy::Local => 'L',
                        Strategy::Reactive => 'R',
                        Strategy::Geographic => 'G',
                        Strategy::Carry => 'C',
                    });
                }
            }
            RouterEvent::Dropped {
                origin,
                bundle,
                cause,
            } => {
                if let Some(b) = self.bundles.get_mut(&(origin - 1, bundle)) {
                    if b.delivered.is_none() {
                        b.cause = Some(cause);
                    }
                }
            }
        }
    }
}

impl World {
    /// RSUs get their routers when the run starts.
    pub(crate) fn sensing_init(&mut self) -> Result<(), String> {
        let (cfg, rsus) = {
            let s = self.sensing.as_ref().expect("sensing");
            (s.cfg.clone(), s.rsus.clone())
        };
        for &(id, pos) in rsus.all() {
            let i = id - 1;
            let mut r = Router::new(
                id,
                Role::Rsu,
                cfg.clone(),
                rsus.clone(),
                self.seed ^ u64::from(id),
            )?;
            r.set_motion(Duration::ZERO, pos, Vec2::default(), None);
            self.nodes[i as usize].router = Some(r);
            self.pump_router(i);
        }
        Ok(())
    }

    pub(crate) fn sensing_arrive(&mut self, i: u32) {
        let now = self.now;
        let s = self.sensing.as_mut().expect("sensing");
        let n = &self.nodes[i as usize];
        if !n.wave {
            return; // no 802.11p radio: no router, no sensing
        }
        let Ok(mut r) = Router::new(
            i + 1,
            Role::Vehicle,
            s.cfg.clone(),
            s.rsus.clone(),
            self.seed ^ u64::from(i),
        ) else {
            return;
        };
        r.set_motion(Duration::from_nanos(now), n.pos, n.vel, n.dest);
        self.nodes[i as usize].router = Some(r);
        let key = self.mob.vehicles()[i as usize].key.clone();
        let rng = s.rngs[i as usize]
            .get_or_insert_with(|| Rng::fork(self.seed, &format!("sensing/{key}")));
        if rng.uniform() < s.spec.share {
            let start = now.max((s.spec.start_s * SEC as f64) as Nanos);
            let at = start + (exponential(rng, s.spec.mean_interval_s) * SEC as f64) as Nanos;
            if at < s.stop {
                let burst = s.spec.burst;
                self.q.push(at, Ev::Burst(i, burst));
            }
        }
        self.pump_router(i);
    }

    pub(crate) fn on_burst(&mut self, i: u32, left: u32) {
        let now = self.now;
        if !self.nodes[i as usize].present {
            return;
        }
        let s = self.sensing.as_mut().expect("sensing");
        if now >= s.stop {
            return;
        }
        let len = s.spec.bundle_bytes;
        let Some(r) = self.nodes[i as usize].router.as_mut() else {
            return;
        };
        let b = r.originate(Duration::from_nanos(now), len);
        s.bundles.insert(
            (i, b),
            BundleRec {
                created: now,
                ..BundleRec::default()
            },
        );
        if left > 1 {
            self.q.push(now + 100 * MS, Ev::Burst(i, left - 1));
        } else if let Some(rng) = s.rngs[i as usize].as_mut() {
            let at = now + (exponential(rng, s.spec.mean_interval_s) * SEC as f64) as Nanos;
            if at < s.stop {
                self.q.push(at, Ev::Burst(i, s.spec.burst));
            }
        }
        self.pump_router(i);
    }
}

/// The strategies in SUR order, for reports.
pub const STRATEGIES: [Strategy; 4] = [
    Strategy::Local,
    Strategy::Reactive,
    Strategy::Geographic,
    Strategy::Carry,
];
