//! The clustered VANET's claim (SPEC S9, mena-2017 ch. 3): as vehicles
//! grow, Wi-Fi + LTE delivers more awareness messages in time than Wi-Fi
//! or LTE alone. At 400 vehicles on the 0.8 km grid about 57 are on the
//! intersection's roads: enough to fill the shared Wi-Fi channel and the
//! cell's downlink under per-vehicle LTE relaying.

use convoy_fleet::{run, Scenario};

const SCENARIO: &str = r#"name = "clusters"
duration_s = 30
enodeb = [{ x = 400, y = 400 }]
[mobility]
grid = { blocks = 4, block_m = 200, vehicles = 400, speed_mps = 13.89 }
[clusters]
radios = "both"
intersection = { x = 400, y = 400 }
"#;

fn delivery(radios: &str) -> f64 {
    let sets = [("clusters.radios".to_string(), radios.to_string())];
    let sc = Scenario::parse_with(SCENARIO, &sets).unwrap();
    let out = run(sc, 1, None, |_, _| {}).unwrap();
    let c = out.summary.clusters.unwrap();
    assert!(c.expected > 1000, "{c:?}");
    c.delivery_ratio
}

#[test]
fn wifi_and_lte_together_deliver_more_than_either_alone() {
    let (wifi, lte, both) = (delivery("wifi"), delivery("lte"), delivery("both"));
    assert!(
        both > wifi && both > lte,
        "both {both}, Wi-Fi {wifi}, LTE {lte}"
    );
    // Members' CAMs reach their head acknowledged and retried; what is
    // lost is the heads' broadcasts to their members, about 1 %.
    assert!(both > 0.97, "both {both}");
}
