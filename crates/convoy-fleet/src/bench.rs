//! The benchmark city of `convoy sim fleet --bench`: a Manhattan grid of
//! 200 m blocks with a building in every block, sized so the density is 41
//! vehicles/km² (the thesis's dense case) whatever the fleet size; RSUs
//! every 1 km, eNodeBs every 2 km; every vehicle beacons and senses (AVE),
//! and one in ten uploads over LTE with convoy-proto.

use crate::scenario::{Scenario, ScenarioError};

pub fn scenario(vehicles: u32, duration_s: f64) -> Scenario {
    scenario_with(vehicles, duration_s, &[]).expect("the bench scenario is valid")
}

/// The benchmark city with `--set` overrides (e.g. `upload.mode=rcdp`).
pub fn scenario_with(
    vehicles: u32,
    duration_s: f64,
    sets: &[(String, String)],
) -> Result<Scenario, ScenarioError> {
    let area_km2 = f64::from(vehicles) / 41.0;
    let side_m = area_km2.sqrt() * 1000.0;
    let blocks = (side_m / 200.0).round().max(2.0) as u32;
    let side = f64::from(blocks) * 200.0;
    let sites = |every: f64| -> String {
        let n = (side / every).ceil().max(1.0) as u32;
        let mut s = String::new();
        for i in 0..n {
            for j in 0..n {
                let x = (f64::from(i) + 0.5) * side / f64::from(n);
                let y = (f64::from(j) + 0.5) * side / f64::from(n);
                s.push_str(&format!(
                    "{{ x = {:.0}, y = {:.0} }}, ",
                    (x / 200.0).round() * 200.0,
                    (y / 200.0).round() * 200.0
                ));
            }
        }
        s
    };
    let text = format!(
        "name = \"bench-{vehicles}\"\nduration_s = {duration_s}\nrsu = [{}]\nenodeb = [{}]\n\
         [mobility]\ngrid = {{ blocks = {blocks}, vehicles = {vehicles}, buildings = true }}\n\
         [sensing]\nprotocol = \"ave\"\nbundle_bytes = 512\nburst = 5\nmean_interval_s = 60\n\
         [upload]\nshare = 0.1\nbytes = 1000000\n",
        sites(1000.0),
        sites(2000.0)
    );
    Scenario::parse_with(&text, sets)
}
