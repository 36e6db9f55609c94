//! convoy's time-series trace: the shipped example, the examples in
//! docs/TRACES.md, and a link driven entirely by a series.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::{drive, periodic};
use convoy_link::{
    Dur, Enqueued, LinkConfig, LinkDirection, LossParams, OutagePolicy, Prob, SeriesTrace, Time,
};

fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")).join(name)
}

fn ms(v: u64) -> Time {
    Time::from_millis(v)
}

#[test]
fn example_file_parses() {
    let t = SeriesTrace::from_file(data("example_series.csv")).unwrap();
    let r = t.rows();
    assert_eq!(r.len(), 5);
    assert_eq!(r[0].rate_bps, 12_000_000);
    assert_eq!(
        r[0].loss,
        LossParams::Bernoulli(Prob::new(0.001, "p").unwrap())
    );
    assert!(matches!(r[1].loss, LossParams::GilbertElliott(_)));
    assert_eq!(
        (r[2].start, r[2].rate_bps, r[2].up),
        (Dur::from_millis(9000), 0, false)
    );
    assert_eq!(r[3].delay, Dur::from_micros(60_500));
    assert_eq!(r[4].loss, LossParams::None);
}

/// The same trace after a pandas round trip (`read_csv(comment='#')`, the
/// `up` column cast to bool, `to_csv(index=False)`): floats like `25.0`,
/// empty cells for NaN, `True`/`False`.
#[test]
fn pandas_written_trace_parses_identically() {
    let ours = SeriesTrace::from_file(data("example_series.csv")).unwrap();
    let pandas = SeriesTrace::from_file(data("example_series_pandas.csv")).unwrap();
    assert_eq!(ours.rows(), pandas.rows());
}

/// Every ```csv block of docs/TRACES.md that has a `start_` header must parse,
/// so the documentation cannot drift from the parser.
#[test]
fn docs_examples_parse() {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/TRACES.md"));
    let doc = std::fs::read_to_string(&path).expect("docs/TRACES.md");
    let mut parsed = 0;
    for block in doc.split("```csv\n").skip(1) {
        let body = block.split("```").next().unwrap();
        if body.lines().any(|l| l.starts_with("start_")) {
            SeriesTrace::parse(body, "docs/TRACES.md").unwrap();
            parsed += 1;
        }
    }
    assert!(parsed >= 2, "expected series examples in docs/TRACES.md");
}

#[test]
fn link_follows_rate_delay_and_outage_of_the_example() {
    let trace = Arc::new(SeriesTrace::from_file(data("example_series.csv")).unwrap());
    let mut l: LinkDirection = LinkDirection::new(LinkConfig::series(trace).with_seed(1)).unwrap();
    // One 1500-byte packet every 100 ms, well below every rate.
    let (d, v) = drive(
        &mut l,
        &periodic(200, 50_000_000, 100_000_000, 1500),
        Time::from_secs(30),
    );
    assert!(v.iter().all(|(_, e)| *e == Enqueued::Accepted));
    let by_id = |id: u64| d.iter().find(|x| x.id == id);
    // 0.05 s: 12 Mbit/s (1 ms for 1500 bytes), 25 ms away.
    let p = by_id(0).unwrap();
    assert_eq!((p.departed_at, p.at), (ms(51), ms(76)));
    // 7.05 s: 8 Mbit/s (1.5 ms), 30 ms away (unless the fading lost it).
    if let Some(p) = by_id(70) {
        assert_eq!(
            (p.departed_at, p.at),
            (Time::from_micros(7_051_500), Time::from_micros(7_081_500))
        );
    }
    // 9.05 .. 9.75 s: down (held). All eight leave after 9.8 s at 4 Mbit/s
    // (3 ms each), back to back.
    let held: Vec<Time> = (90..98).filter_map(by_id).map(|p| p.departed_at).collect();
    let lost_in_gap = 8 - held.len() as u64;
    assert!(lost_in_gap <= 2, "row 3 loses 2 %");
    for w in held.windows(2) {
        assert_eq!(w[1] - w[0], Dur::from_millis(3));
    }
    assert!(held[0] >= ms(9803));
    // 20.05 s: 12 Mbit/s and 25 ms again, no loss.
    for id in 150..200 {
        assert!(by_id(id).is_some(), "packet {id} lost in a lossless row");
    }
    let p = by_id(199).unwrap();
    assert_eq!(p.at - p.departed_at, Dur::from_millis(25));
}

#[test]
fn series_outage_drops_under_drop_policy_and_loss_follows_rows() {
    let trace = SeriesTrace::parse(
        "start_ms,rate_mbps,delay_ms,loss_p,up\n0,8,0,0,1\n10,8,0,1,1\n20,8,0,0,0\n30,8,0,0,1\n",
        "inline",
    )
    .unwrap();
    let config = LinkConfig::series(Arc::new(trace)).with_outage_policy(OutagePolicy::Drop);
    let mut l: LinkDirection = LinkDirection::new(config).unwrap();
    // 100-byte packets (0.1 ms) every ms for 40 ms.
    let (d, v) = drive(&mut l, &periodic(40, 0, 1_000_000, 100), ms(100));
    let delivered: Vec<u64> = d.iter().map(|d| d.id).collect();
    let want: Vec<u64> = (0..10).chain(30..40).collect();
    assert_eq!(delivered, want);
    let refused: Vec<u64> = v
        .iter()
        .filter(|(_, e)| *e != Enqueued::Accepted)
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(refused, (20..30).collect::<Vec<_>>());
}

#[test]
fn repeating_series_wraps() {
    let trace = SeriesTrace::parse(
        "start_ms,rate_kbps,delay_ms\n0,8000,5\n10,8000,50\n",
        "inline",
    )
    .unwrap()
    .with_repeat(Dur::from_millis(20))
    .unwrap();
    let mut l: LinkDirection = LinkDirection::new(LinkConfig::series(Arc::new(trace))).unwrap();
    let (d, _) = drive(&mut l, &periodic(8, 0, 5_000_000, 1000), ms(500));
    // Departures at 1, 6, 11, 16, 21, ... ms: delays 5, 5, 50, 50, 5, ...
    // but order is kept, so the fast ones wait behind the slow ones.
    let one_way: Vec<u64> = d
        .iter()
        .map(|d| (d.at - d.departed_at).as_nanos() / 1_000_000)
        .collect();
    let at: Vec<u64> = d.iter().map(|d| d.at.as_nanos() / 1_000_000).collect();
    assert_eq!(at, [6, 11, 61, 66, 66, 66, 81, 86]);
    assert_eq!(one_way, [5, 5, 50, 50, 45, 40, 50, 50]);
}

#[test]
fn series_config_errors() {
    let no_rate = Arc::new(SeriesTrace::parse("start_ms,delay_ms\n0,5\n", "s").unwrap());
    assert!(LinkDirection::<convoy_link::NoAqm>::new(LinkConfig::series(no_rate.clone())).is_err());
    // Delay from the series, constant capacity: fine.
    let mut config = LinkConfig::constant(1_000_000);
    config.delay.base = convoy_link::DelaySource::Series;
    assert!(LinkDirection::<convoy_link::NoAqm>::new(config.clone()).is_err());
    config.series = Some(no_rate);
    assert!(LinkDirection::<convoy_link::NoAqm>::new(config).is_ok());
}
