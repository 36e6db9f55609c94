//! Mobility from a SUMO FCD file and buildings from a SUMO polygon file,
//! and the errors a user sees for bad inputs.

use std::path::PathBuf;

use convoy_fleet::{run, Scenario};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("convoy-fleet-fcd-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two cars driving toward an RSU at (0, 0) from 900 m and 700 m away.
fn fcd() -> String {
    let mut s = String::from("<fcd-export>\n");
    for t in 0..=60 {
        let x1 = 900.0 - 12.0 * f64::from(t);
        let x2 = 700.0 - 10.0 * f64::from(t);
        s.push_str(&format!(
            "<timestep time=\"{t}.00\"><vehicle id=\"a\" x=\"{x1:.2}\" y=\"5.00\" speed=\"12\"/>\
             <vehicle id=\"b\" x=\"{x2:.2}\" y=\"-5.00\" speed=\"10\"/></timestep>\n"
        ));
    }
    s + "</fcd-export>\n"
}

const SCENARIO: &str = "duration_s = 60\nrsu = [{ x = 0, y = 0 }]\n[mobility]\nfcd = \"fcd.xml\"\nbuildings = \"polys.xml\"\n\
                        [sensing]\nprotocol = \"ave\"\nmean_interval_s = 5\nstop_s = 20\n";

#[test]
fn fcd_vehicles_carry_bundles_to_the_rsu() {
    let d = dir("ok");
    std::fs::write(d.join("fcd.xml"), fcd()).unwrap();
    // A building south of the road, not between the cars and the RSU.
    std::fs::write(
        d.join("polys.xml"),
        "<additional><poly id=\"b\" type=\"building\" shape=\"100,-60 200,-60 200,-20 100,-20 100,-60\"/></additional>",
    )
    .unwrap();
    std::fs::write(d.join("s.toml"), SCENARIO).unwrap();
    let sc = Scenario::load(&d.join("s.toml")).unwrap();
    let out = run(sc, 3, Some(&d.join("out")), |_, _| {}).unwrap();
    let s = out.summary.sensing.unwrap();
    assert_eq!(out.summary.vehicles, 2);
    assert!(s.bundles >= 5, "{s:?}");
    // Driving toward the RSU, carry delivers nearly everything.
    assert!(s.delivery_ratio > 0.8, "{s:?}");
    let nodes = std::fs::read_to_string(d.join("out/nodes.csv")).unwrap();
    assert!(
        nodes.contains(",vehicle,a,") && nodes.contains(",rsu,rsu0,"),
        "{nodes}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bad_inputs_are_clear_errors() {
    let d = dir("bad");
    std::fs::write(d.join("s.toml"), SCENARIO).unwrap();
    let sc = Scenario::load(&d.join("s.toml")).unwrap();
    let e = run(sc, 1, None, |_, _| {}).err().unwrap().to_string();
    assert!(e.contains("fcd.xml"), "{e}");
    std::fs::write(
        d.join("fcd.xml"),
        "<fcd-export><timestep time=\"0\"><vehicle id=\"a\" x=\"1\"",
    )
    .unwrap();
    let sc = Scenario::load(&d.join("s.toml")).unwrap();
    let e = run(sc, 1, None, |_, _| {}).err().unwrap().to_string();
    assert!(e.contains("fcd.xml"), "{e}");
    let e = Scenario::load(&d.join("missing.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing.toml"), "{e}");
    std::fs::write(d.join("bad.toml"), "duration_s = \"long\"\n").unwrap();
    let e = Scenario::load(&d.join("bad.toml")).unwrap_err().to_string();
    assert!(e.contains("bad.toml"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn vehicles_without_a_radio_neither_send_nor_receive() {
    let d = dir("radio");
    std::fs::write(d.join("fcd.xml"), fcd()).unwrap();
    std::fs::write(
        d.join("polys.xml"),
        "<additional><poly id=\"b\" type=\"building\" shape=\"100,-60 200,-60 200,-20 100,-20 100,-60\"/></additional>",
    )
    .unwrap();
    std::fs::write(
        d.join("s.toml"),
        format!("{SCENARIO}[vehicles]\nwave_share = 0\n"),
    )
    .unwrap();
    let sc = Scenario::load(&d.join("s.toml")).unwrap();
    let out = run(sc, 3, Some(&d.join("out")), |_, _| {}).unwrap();
    let s = out.summary.sensing.unwrap();
    assert_eq!(s.bundles, 0, "{s:?}");
    let nodes = std::fs::read_to_string(d.join("out/nodes.csv")).unwrap();
    // Vehicles: no radio, nothing sent or received.
    assert!(
        nodes
            .lines()
            .filter(|l| l.contains(",vehicle,"))
            .all(|l| l.contains(",0,1,0,0,")),
        "{nodes}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
