use super::*;
use convoy_telemetry::campaign::Campaign;
use convoy_telemetry::SignalCatalog;
use proptest::prelude::*;

const SPEED: &str = "Vehicle.Speed";
const BRAKE: &str = "Vehicle.Private.Brake";

fn campaign(when: &str, pre_ms: u64, post_ms: u64, interval_ms: u64) -> Campaign {
    let text = format!(
        "name = \"c\"\npre_seconds = {}\npost_seconds = {}\n\
         [[signal]]\nname = \"{SPEED}\"\ninterval_ms = {interval_ms}\n\
         [[signal]]\nname = \"{BRAKE}\"\n\
         [[trigger]]\nname = \"t\"\nwhen = \"{when}\"\n",
        pre_ms as f64 / 1e3,
        post_ms as f64 / 1e3
    );
    Campaign::parse("test", &text, &SignalCatalog::default()).unwrap()
}

fn s(t_ms: i64, path: &str, v: Value) -> Sample {
    Sample {
        t_ns: t_ms * 1_000_000,
        path: path.into(),
        value: v,
    }
}

fn run(e: &mut Engine, input: &[Sample]) -> Vec<Window> {
    let mut out = Vec::new();
    for (i, x) in input.iter().enumerate() {
        out.extend(e.push(x, Duration::from_millis(i as u64)));
    }
    out.extend(e.flush());
    out
}

#[test]
fn speed_and_a_rising_brake_fire_once_per_press_with_both_windows() {
    let mut e = Engine::new(campaign(
        "Vehicle.Speed > 30 && rising(Vehicle.Private.Brake)",
        300,
        200,
        0,
    ));
    let mut input = Vec::new();
    for t in 0..40 {
        let speed = if t < 20 { 20.0 } else { 40.0 };
        input.push(s(t * 100, SPEED, Value::Number(speed)));
        // Pressed at 1.0 s (too slow), 2.5 s (fires) and held to 3.0 s,
        // pressed again at 3.5 s (fires).
        let pressed = matches!(t, 10..=12 | 25..=30 | 35);
        input.push(s(t * 100 + 50, BRAKE, Value::Bool(pressed)));
    }
    let w = run(&mut e, &input);
    let times: Vec<i64> = w.iter().map(|w| w.t_ns / 1_000_000).collect();
    assert_eq!(times, [2550, 3550]);
    assert!(w.iter().all(|w| w.complete));
    let first: Vec<i64> = w[0].samples.iter().map(|x| x.t_ns / 1_000_000).collect();
    let mut sorted = first.clone();
    sorted.sort();
    // 2250..=2750: speed at 2300..2700, brake at 2250..2750.
    assert_eq!(sorted.first(), Some(&2250));
    assert_eq!(sorted.last(), Some(&2750));
    assert_eq!(first.len(), 5 + 6);
}

#[test]
fn thinning_keeps_one_sample_per_interval_and_quiet_input_closes_a_window() {
    let mut e = Engine::new(campaign("Vehicle.Private.Brake", 1000, 5000, 250));
    let mut out = Vec::new();
    for t in 0..10 {
        out.extend(e.push(&s(t * 100, SPEED, Value::Number(1.0)), Duration::ZERO));
    }
    out.extend(e.push(&s(1000, BRAKE, Value::Bool(true)), Duration::ZERO));
    assert!(out.is_empty());
    assert_eq!(e.open_windows(), 1);
    assert!(e.tick(Duration::from_secs(1)).is_empty());
    let w = e.tick(QUIET_CLOSE);
    assert_eq!(w.len(), 1);
    assert!(!w[0].complete);
    let speeds: Vec<i64> = w[0]
        .samples
        .iter()
        .filter(|x| x.path == SPEED)
        .map(|x| x.t_ns / 1_000_000)
        .collect();
    assert_eq!(speeds, [0, 300, 600, 900]);
}

#[test]
fn the_ring_holds_at_most_max_samples() {
    let text = format!(
        "name = \"c\"\npre_seconds = 100\npost_seconds = 0\n\
         [[signal]]\nname = \"{SPEED}\"\nmax_samples = 3\n\
         [[trigger]]\nwhen = \"{BRAKE}\"\n"
    );
    let mut e = Engine::new(Campaign::parse("t", &text, &SignalCatalog::default()).unwrap());
    for t in 0..10 {
        e.push(&s(t, SPEED, Value::Number(t as f64)), Duration::ZERO);
    }
    e.push(&s(10, BRAKE, Value::Bool(true)), Duration::ZERO);
    let w = e.push(&s(11, SPEED, Value::Number(0.0)), Duration::ZERO);
    let t: Vec<i64> = w[0].samples.iter().map(|x| x.t_ns / 1_000_000).collect();
    assert_eq!(t, [7, 8, 9]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every window holds exactly the samples in [t - pre, t + post] (each
    /// once), and the trigger fires once per rising edge of the brake.
    #[test]
    fn windows_are_exact_and_edges_fire_once(
        steps in prop::collection::vec((1i64..40, any::<bool>(), 0.0f64..60.0, any::<bool>()), 1..300),
        pre_ms in 0u64..500,
        post_ms in 0u64..500,
    ) {
        let mut e = Engine::new(campaign("rising(Vehicle.Private.Brake)", pre_ms, post_ms, 0));
        let mut t = 0i64;
        let mut input = Vec::new();
        let mut edges = 0;
        let mut last = false;
        for (dt, is_brake, speed, pressed) in steps {
            t += dt;
            if is_brake {
                if pressed && !last { edges += 1; }
                last = pressed;
                input.push(s(t, BRAKE, Value::Bool(pressed)));
            } else {
                input.push(s(t, SPEED, Value::Number(speed)));
            }
        }
        let windows = run(&mut e, &input);
        prop_assert_eq!(windows.len(), edges);
        prop_assert_eq!(e.fired as usize, edges);
        for w in &windows {
            let mut got: Vec<(i64, String)> =
                w.samples.iter().map(|x| (x.t_ns, x.path.clone())).collect();
            let n = got.len();
            got.sort();
            got.dedup();
            prop_assert_eq!(got.len(), n, "no duplicates");
            // Times are distinct, so (t, path) names a sample.
            let want: Vec<(i64, String)> = input
                .iter()
                .filter(|x| x.t_ns >= w.from_ns && x.t_ns <= w.to_ns)
                .map(|x| (x.t_ns, x.path.clone()))
                .collect();
            prop_assert_eq!(got, want);
        }
    }
}
