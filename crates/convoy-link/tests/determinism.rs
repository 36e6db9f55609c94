//! Same seed, same records; different seed, different records; and the
//! record stream's invariants, over randomly drawn configurations.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::{drive, Arrival};
use convoy_link::{
    parse_records, records_to_csv, CoDel, Dur, LinkConfig, LinkDirection, LossModel, LossPosition,
    MahimahiTrace, OutagePolicy, QueueLimit, Record, RecordKind, Time,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Scenario {
    mahimahi: bool,
    rate_bps: u64,
    loss: LossModel,
    before_queue: bool,
    jitter_us: u64,
    reorder: bool,
    limit: QueueLimit,
    outage: Option<(u64, u64, bool)>,
    codel: bool,
    /// (gap in us, length) per packet.
    packets: Vec<(u64, u32)>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let loss = prop_oneof![
        Just(LossModel::None),
        (0.0..=1.0f64).prop_map(|p| LossModel::Bernoulli { p }),
        (0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64).prop_map(|(a, b, c, d)| {
            LossModel::GilbertElliott {
                p_gb: a,
                p_bg: b,
                loss_good: c,
                loss_bad: d,
            }
        }),
        (1..10u64).prop_map(|n| LossModel::EveryNth { n }),
    ];
    let limit = prop_oneof![
        Just(QueueLimit::Unlimited),
        (1..50u64).prop_map(QueueLimit::Packets),
        (1500..60_000u64).prop_map(QueueLimit::Bytes),
    ];
    (
        any::<bool>(),
        100_000..50_000_000u64,
        loss,
        any::<bool>(),
        prop_oneof![Just(0u64), 1..20_000u64],
        any::<bool>(),
        limit,
        proptest::option::of((0..200u64, 1..200u64, any::<bool>())),
        any::<bool>(),
        proptest::collection::vec((0..3000u64, 1..3000u32), 1..300),
    )
        .prop_map(
            |(
                mahimahi,
                rate_bps,
                loss,
                before_queue,
                jitter_us,
                reorder,
                limit,
                outage,
                codel,
                packets,
            )| Scenario {
                mahimahi,
                rate_bps,
                loss,
                before_queue,
                jitter_us,
                reorder,
                limit,
                outage,
                codel,
                packets,
            },
        )
}

fn config(s: &Scenario, seed: u64) -> LinkConfig {
    let mut c = if s.mahimahi {
        let trace = MahimahiTrace::parse("0\n1\n1\n3\n7\n7\n7\n9\n", "small").unwrap();
        LinkConfig::mahimahi(Arc::new(trace))
    } else {
        LinkConfig::constant(s.rate_bps)
    };
    c = c
        .with_delay(Dur::from_millis(3))
        .with_jitter(Dur::from_micros(s.jitter_us), s.reorder)
        .with_loss(s.loss.clone())
        .with_loss_position(if s.before_queue {
            LossPosition::BeforeQueue
        } else {
            LossPosition::AfterQueue
        })
        .with_queue(s.limit)
        .with_seed(seed)
        .with_records(true);
    if let Some((start_ms, len_ms, drop)) = s.outage {
        let policy = if drop {
            OutagePolicy::Drop
        } else {
            OutagePolicy::Hold
        };
        c = c.with_outages(
            vec![(
                Time::from_millis(start_ms),
                Time::from_millis(start_ms + len_ms),
            )],
            policy,
        );
    }
    c
}

fn arrivals(s: &Scenario) -> Vec<Arrival> {
    let mut t = 0;
    s.packets
        .iter()
        .enumerate()
        .map(|(id, &(gap, len))| {
            t += gap;
            Arrival {
                at: Time::from_micros(t),
                len,
                id: id as u64,
            }
        })
        .collect()
}

fn run(s: &Scenario, seed: u64) -> Vec<Record> {
    let until = Time::from_secs(3600);
    if s.codel {
        let mut l: LinkDirection<CoDel> = LinkDirection::new(config(s, seed)).unwrap();
        drive(&mut l, &arrivals(s), until);
        l.take_records()
    } else {
        let mut l: LinkDirection = LinkDirection::new(config(s, seed)).unwrap();
        drive(&mut l, &arrivals(s), until);
        l.take_records()
    }
}

/// Every packet: one `enq`, then exactly one `drop` or `dlv`, not earlier.
fn check_invariants(s: &Scenario, records: &[Record]) {
    let mut state: HashMap<u64, (Time, bool)> = HashMap::new();
    for r in records {
        match r.kind {
            RecordKind::Enqueue => {
                assert!(
                    state.insert(r.id, (r.t, false)).is_none(),
                    "double enq {}",
                    r.id
                );
            }
            RecordKind::Drop(_) | RecordKind::Deliver { .. } => {
                let e = state.get_mut(&r.id).expect("terminal record before enq");
                assert!(!e.1, "two terminal records for {}", r.id);
                assert!(r.t >= e.0);
                e.1 = true;
                if let RecordKind::Deliver { queue_delay } = r.kind {
                    assert!(r.t >= e.0 + queue_delay);
                }
            }
        }
    }
    assert_eq!(state.len(), s.packets.len());
    assert!(
        state.values().all(|v| v.1),
        "every packet finishes within an hour"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn same_seed_gives_same_records(s in scenario(), seed in any::<u64>()) {
        let a = run(&s, seed);
        let b = run(&s, seed);
        prop_assert_eq!(&a, &b);
        check_invariants(&s, &a);
        // The CSV form is lossless.
        let csv = records_to_csv(&a);
        prop_assert_eq!(parse_records(&csv, "records.csv").unwrap(), a);
    }

    #[test]
    fn different_seeds_give_different_records(
        p in 0.2..0.8f64,
        seed in any::<u64>(),
        other in any::<u64>(),
    ) {
        prop_assume!(seed != other);
        let s = Scenario {
            mahimahi: false,
            rate_bps: 10_000_000,
            loss: LossModel::Bernoulli { p },
            before_queue: false,
            jitter_us: 500,
            reorder: false,
            limit: QueueLimit::Unlimited,
            outage: None,
            codel: false,
            packets: vec![(100, 1000); 200],
        };
        prop_assert_ne!(run(&s, seed), run(&s, other));
    }
}
